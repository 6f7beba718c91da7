//go:build tools

// Package server pins the Dendrite homeserver that latch's Matrix tests run
// against. It is a module of its own so that latch's go.mod and binary never
// depend on Dendrite; nothing here is compiled into latch.
package server

import (
	_ "github.com/matrix-org/dendrite/cmd/create-account"
	_ "github.com/matrix-org/dendrite/cmd/dendrite"
	_ "github.com/matrix-org/dendrite/cmd/generate-config"
	_ "github.com/matrix-org/dendrite/cmd/generate-keys"
)

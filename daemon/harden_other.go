//go:build !linux

package daemon

import "os"

// Harden is a no-op where latch has no prctl; see harden_linux.go.
func Harden() (getenv func(string) string, err error) { return os.Getenv, nil }

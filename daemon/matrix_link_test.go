package daemon

import "github.com/latchd/latch/internal/matrixlink"

// The daemon's tests run Matrix in process, as latch-matrix does
// (cmd/latch-matrix links the adapter the same way).
func init() { LinkGateway("matrix", matrixlink.New) }

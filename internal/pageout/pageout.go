// Package pageout gives the kernel back the pages of a latch binary that
// start-up touched and idle does not need, and the heap its package inits
// left as garbage (GiveBackStartup). The daemon and the MCP sidecar
// (cmd/latch-mcp) call it once they are ready.
package pageout

import (
	"log/slog"
	"time"
)

// EnvNoPageOut set to 1 turns GiveBackStartup off.
const EnvNoPageOut = "LATCH_NO_PAGEOUT"

// Result says what GiveBackStartup did, for the log and tests.
type Result struct {
	Skipped  string // why nothing was done; "" when it ran
	Mappings int    // read-only mappings of the executable advised
	Bytes    uint64 // their size
	Err      error  // the first madvise that failed, if any

	Collection time.Duration // how long the collection before it took
}

// Log reports r at debug level, or as a warning when advice failed:
// either way the program runs on.
func Log(log *slog.Logger, r Result) {
	switch {
	case r.Err != nil:
		log.Warn("giving back start-up pages failed; running on", "err", r.Err, "skipped", r.Skipped, "collection", r.Collection)
	case r.Skipped != "":
		log.Debug("start-up pages kept", "why", r.Skipped, "collection", r.Collection)
	default:
		log.Debug("start-up pages given back", "mappings", r.Mappings, "bytes", r.Bytes, "collection", r.Collection)
	}
}

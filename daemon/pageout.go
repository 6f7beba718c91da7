package daemon

import "log/slog"

// EnvNoPageOut set to 1 turns giveBackStartup off.
const EnvNoPageOut = "LATCH_NO_PAGEOUT"

// pageOutResult says what giveBackStartup did, for the log and tests.
type pageOutResult struct {
	Skipped  string // why nothing was done; "" when it ran
	Mappings int    // read-only mappings of the executable advised
	Bytes    uint64 // their size
	Err      error  // the first madvise that failed, if any
}

// logPageOut reports r at debug level, or as a warning when advice failed:
// either way the daemon runs on.
func logPageOut(log *slog.Logger, r pageOutResult) {
	switch {
	case r.Err != nil:
		log.Warn("giving back start-up pages failed; running on", "err", r.Err, "skipped", r.Skipped)
	case r.Skipped != "":
		log.Debug("start-up pages kept", "why", r.Skipped)
	default:
		log.Debug("start-up pages given back", "mappings", r.Mappings, "bytes", r.Bytes)
	}
}

//go:build !linux

package daemon

// giveBackStartup does nothing outside Linux: MADV_PAGEOUT and
// /proc/self/maps are Linux's (see pageout_linux.go).
func giveBackStartup() pageOutResult { return pageOutResult{Skipped: "not Linux"} }

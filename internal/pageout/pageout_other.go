//go:build !linux

package pageout

// GiveBackStartup does nothing outside Linux: MADV_PAGEOUT and
// /proc/self/maps are Linux's (see pageout_linux.go).
func GiveBackStartup() Result { return Result{Skipped: "not Linux"} }

//go:build !unix

package config

import "io/fs"

// fileOwner reports no owner where files have no uid; latch's security
// model (peer credentials, mode bits) is Unix-only anyway.
func fileOwner(fs.FileInfo) (int, bool) { return 0, false }

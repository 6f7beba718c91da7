package config

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// ErrInsecure marks a refusal because a file or directory can be read or
// changed by someone other than the user latch runs as. The message always
// says how to fix it.
var ErrInsecure = errors.New("insecure permissions")

// insecureError is an ErrInsecure with its own message: the wrapped sentinel
// would only repeat what the message already says.
type insecureError struct{ msg string }

func (e *insecureError) Error() string        { return e.msg }
func (e *insecureError) Is(target error) bool { return target == ErrInsecure }

func insecuref(format string, args ...any) error {
	return &insecureError{msg: fmt.Sprintf(format, args...)}
}

// CheckHome verifies that home is a directory owned by the current user with
// no permission bits for group or others. Everything latch keeps there (the
// token, the HMAC key, the store, the control socket) relies on it.
//
// CheckHome never changes permissions itself: a directory the user made is
// theirs to fix, and the error says how.
func CheckHome(home string) error {
	fi, err := os.Stat(home)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("latch home %s: %w; run latch init", home, fs.ErrNotExist)
		}
		return fmt.Errorf("latch home: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("latch home %s is not a directory", home)
	}
	if err := checkOwner(home, fi); err != nil {
		return err
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return insecuref("latch home %s is open to other users (mode %04o); fix it with: chmod 700 %s",
			home, perm, home)
	}
	return nil
}

// checkOwner refuses a file or directory that belongs to another user: its
// owner could change it under us whatever its mode says.
func checkOwner(path string, fi fs.FileInfo) error {
	uid, ok := fileOwner(fi)
	if !ok {
		return nil
	}
	if me := os.Geteuid(); me >= 0 && uid != me {
		return insecuref("%s is owned by uid %d, but latch runs as uid %d; it must belong to you (chown it, or remove it)",
			path, uid, me)
	}
	return nil
}

// checkPrivate refuses a file that group or others may access in any way.
func checkPrivate(path string, fi fs.FileInfo, what string) error {
	if err := checkOwner(path, fi); err != nil {
		return err
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return insecuref("%s %s is open to other users (mode %04o); fix it with: chmod 600 %s",
			what, path, perm, path)
	}
	return nil
}

// readFile reads a regular file of at most limit bytes and returns its
// content with the FileInfo of the opened file, so checks made on the
// FileInfo apply to exactly the bytes returned.
func readFile(path string, limit int64) ([]byte, fs.FileInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("%s is not a regular file", path)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, nil, err
	}
	if int64(len(data)) > limit {
		return nil, nil, fmt.Errorf("%s is larger than %d bytes", path, limit)
	}
	return data, fi, nil
}

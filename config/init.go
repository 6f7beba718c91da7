package config

import (
	"crypto/rand"
	_ "embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// template is written as config.toml by Init. It documents every key with
// its default, all commented out.
//
//go:embed template.toml
var template []byte

// Init creates latch's state directory and returns the paths it created, in
// order. It is idempotent and never overwrites or changes anything that
// exists:
//
//   - home, mode 0700. If home already exists it must pass [CheckHome]; a
//     directory the user made is theirs, so Init reports a loose mode with the
//     chmod that fixes it instead of changing it. A directory Init creates is
//     set to exactly 0700 whatever the umask.
//   - config.toml, mode 0600: a commented template, so defaults apply.
//     Its table headers are commented too, so that a user may append
//     "[telegram]" and a token; webhook mode gets its secret from
//     [EnsureWebhookSecret] once webhook_url is set.
//   - secret, mode 0600: 32 random bytes, the HMAC key for pairing codes.
//   - workspace, mode 0700: the default agent workspace.
//
// Existing files are not checked here; [Load] and [LoadSecret] do that.
func Init(home string) (created []string, err error) {
	if home == "" {
		return nil, errors.New("init: no latch home directory given")
	}
	home, err = filepath.Abs(home)
	if err != nil {
		return nil, fmt.Errorf("init: %w", err)
	}
	made, err := makeDir(home)
	if err != nil {
		return nil, fmt.Errorf("init: %w", err)
	}
	if made {
		created = append(created, home)
	}
	// Secrets go in only once the directory is known to be private.
	if err := CheckHome(home); err != nil {
		return created, err
	}

	key := make([]byte, secretSize)
	rand.Read(key) // never returns an error; it crashes the program instead
	steps := []struct {
		name string
		data []byte
	}{
		{ConfigFile, template},
		{SecretFile, key},
	}
	for _, s := range steps {
		path := filepath.Join(home, s.name)
		made, err := writeNew(path, s.data)
		if err != nil {
			return created, fmt.Errorf("init: %w", err)
		}
		if made {
			created = append(created, path)
		}
	}

	ws := filepath.Join(home, DefaultWorkspace)
	made, err = makeDir(ws)
	if err != nil {
		return created, fmt.Errorf("init: %w", err)
	}
	if made {
		created = append(created, ws)
	}
	return created, nil
}

// makeDir creates dir with mode 0700 (parents too) and reports whether it
// did. An existing dir is left alone.
func makeDir(dir string) (bool, error) {
	err := os.Mkdir(dir, 0o700)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
			return false, err
		}
		err = os.Mkdir(dir, 0o700)
	}
	if errors.Is(err, fs.ErrExist) {
		fi, serr := os.Stat(dir)
		if serr != nil {
			return false, serr
		}
		if !fi.IsDir() {
			return false, fmt.Errorf("%s exists and is not a directory", dir)
		}
		return false, nil
	}
	if err != nil {
		return false, err
	}
	// Mkdir's mode is filtered by the umask; ours is exact.
	return true, os.Chmod(dir, 0o700)
}

// writeNew creates path with mode 0600 and writes data, unless path already
// exists (even as a dangling symlink: O_EXCL does not follow it). It reports
// whether it wrote the file. A half-written file is removed, so a later Init
// starts over instead of keeping a short key.
func writeNew(path string, data []byte) (written bool, err error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer func() {
		if err != nil {
			os.Remove(path)
		}
	}()
	if _, err := f.Write(data); err != nil {
		f.Close()
		return false, err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return false, err
	}
	if err := f.Close(); err != nil {
		return false, err
	}
	return true, nil
}

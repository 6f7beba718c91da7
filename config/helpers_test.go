package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// otherUID is a uid that owns nothing on the test machine.
const otherUID = 4242

// testToken looks like a real bot token; the part after ':' is the secret.
const testToken = "123456789:AAHfiqksKZ8WmR2zSjiQ7_v4TMAKdiHm9T0"

// newHome returns a fresh, private latch home.
func newHome(t *testing.T) string {
	t.Helper()
	home := filepath.Join(t.TempDir(), "latch")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	return home
}

// writeFile writes content with exactly mode, whatever the umask.
func writeFile(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// chownOther gives path to another user. Only root can; CI runs the tests as
// root, so there they always run.
func chownOther(t *testing.T, path string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("giving a file to another user needs root (CI runs the tests as root)")
	}
	if err := os.Lchown(path, otherUID, otherUID); err != nil {
		t.Fatal(err)
	}
}

// testLoader is a Loader with an environment of its own and a fake user home.
func testLoader(t *testing.T, env map[string]string) Loader {
	t.Helper()
	userHome := t.TempDir()
	return Loader{
		Getenv:      func(k string) string { return env[k] },
		UserHomeDir: func() (string, error) { return userHome, nil },
	}
}

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

// checkErr fails unless err is nil when want is empty, or err's message
// contains every string in want.
func checkErr(t *testing.T, err error, want []string) {
	t.Helper()
	if len(want) == 0 {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("got no error, want one containing %q", want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q\ndoes not contain %q", err, w)
		}
	}
}

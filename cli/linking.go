package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/latchd/latch/config"
	"github.com/latchd/latch/daemon"
)

// linkingDeps is what replacing the process takes from the machine; tests
// replace it so that no exec happens.
type linkingDeps struct {
	getenv     func(string) string
	executable func() (string, error)
	exec       func(path string, argv, env []string) error
	environ    func() []string
}

var linking = linkingDeps{getenv: os.Getenv, executable: os.Executable, exec: syscall.Exec, environ: os.Environ}

// execLinked replaces this process with the build that links the
// adapters the config enables and this binary does not (a platform's
// Binary, e.g. latch-matrix, found beside this executable), with the same
// arguments and environment. It returns nil when nothing needs it (no
// such platform configured, or a config that does not load: the command
// reports that itself), and an error when the binary is missing or the
// exec fails. It runs before the daemon hardens itself, which takes
// latch's secrets out of the environment the replacement needs.
func execLinked(args []string) error {
	d := linking
	loader := config.Loader{Getenv: d.getenv}
	home, err := loader.HomeDir()
	if err != nil {
		return nil
	}
	cfg, err := loader.Load(home)
	if err != nil {
		return nil
	}
	missing := daemon.Unlinked(cfg)
	if len(missing) == 0 {
		return nil
	}
	p := missing[0]
	exe, err := d.executable()
	if err != nil {
		return fmt.Errorf("[%s] is configured and needs %s beside latch, but latch cannot find its own path: %w", p.Name, p.Binary, err)
	}
	if exe, err = filepath.EvalSymlinks(exe); err != nil {
		return fmt.Errorf("[%s] is configured and needs %s beside latch: %w", p.Name, p.Binary, err)
	}
	bin := filepath.Join(filepath.Dir(exe), p.Binary)
	if filepath.Base(exe) == p.Binary {
		// A build of latch-matrix without the adapter would exec itself for ever.
		return fmt.Errorf("%w: %s does not link the %s adapter it exists for: rebuild it from ./cmd/%s", daemon.ErrConfig, bin, p.Title, p.Binary)
	}
	why := ""
	if fi, err := os.Stat(bin); err != nil {
		why = "missing"
	} else if !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0 {
		why = "not an executable file"
	}
	if why != "" {
		return fmt.Errorf("%w: [%s] is configured, and latch runs the %s gateway with %s, and %s is %s; "+
			"build it beside latch, in latch's source tree: CGO_ENABLED=0 go build -trimpath -ldflags=\"-s -w\" -o %s ./cmd/%s",
			daemon.ErrConfig, p.Name, p.Title, p.Binary, bin, why, filepath.Dir(bin), p.Binary)
	}
	argv := append([]string{bin}, args...)
	if err := d.exec(bin, argv, d.environ()); err != nil {
		return fmt.Errorf("starting %s: %w", bin, err)
	}
	return nil // only a test's exec returns
}

package dendritetest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
)

// build compiles the binaries of server/'s module into dir. Test binaries of
// several packages may start at once: a lock file lets one build while the
// others wait for its result, and the result appears whole (built beside dir,
// then renamed) or not at all.
func build(ctx context.Context, dir string) error {
	_, self, _, ok := runtime.Caller(0)
	module := filepath.Join(filepath.Dir(self), "server")
	if _, err := os.Stat(filepath.Join(module, "go.mod")); !ok || err != nil {
		return fmt.Errorf("%w: no source of the server module beside %s", errNoBinaries, self)
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("%w: %v", errNoBinaries, err)
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return fmt.Errorf("%w: %v", errNoBinaries, err)
	}
	lock, err := os.OpenFile(dir+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("%w: %v", errNoBinaries, err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("%w: lock %s: %v", errNoBinaries, lock.Name(), err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if haveAll(dir) == nil {
		return nil // another test binary built it while this one waited
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "build")
	if err != nil {
		return fmt.Errorf("%w: %v", errNoBinaries, err)
	}
	defer os.RemoveAll(tmp)
	args := []string{"build", "-o", tmp + string(filepath.Separator)}
	for _, name := range tools {
		args = append(args, "github.com/matrix-org/dendrite/cmd/"+name)
	}
	cmd := exec.CommandContext(ctx, goCmd, args...)
	cmd.Dir = module
	// Dendrite's SQLite is cgo; -mod=readonly holds the build to the
	// committed go.sum, as CI does.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1", "GOFLAGS=-mod=readonly", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%w: go build in %s: %v\n%s", errNoBinaries, module, err, out)
	}
	return os.Rename(tmp, dir)
}

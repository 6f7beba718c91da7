package doctor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
	"golang.org/x/sys/unix"

	"github.com/latchd/latch/config"
	"github.com/latchd/latch/control"
	"github.com/latchd/latch/store"
)

func (r *run) checkHome(context.Context) Check {
	if r.homeErr != nil {
		return fail(r.homeErr.Error(), "set "+config.EnvHome+" to latch's directory")
	}
	err := config.CheckHome(r.home)
	switch {
	case err == nil:
		mode := fs.FileMode(0o700)
		if fi, err := os.Stat(r.home); err == nil {
			mode = fi.Mode().Perm()
		}
		return ok(fmt.Sprintf("%s (mode %04o, yours)", r.home, mode))
	case errors.Is(err, fs.ErrNotExist):
		return fail(fmt.Sprintf("%s does not exist", r.home), "latch init")
	case errors.Is(err, config.ErrInsecure):
		if detail, fix, found := splitFix(err.Error()); found {
			return fail(detail, fix)
		}
		// Owned by someone else: only they, or root, can hand it over.
		return fail(err.Error(), fmt.Sprintf("sudo chown -R %s %s", r.userName(), r.home))
	}
	return fail(err.Error(), fmt.Sprintf("move %s aside and run latch init", r.home))
}

func (r *run) checkConfig(context.Context) Check {
	if r.homeErr != nil {
		return skip("no latch home directory")
	}
	path := filepath.Join(r.home, config.ConfigFile)
	cfg, err := config.Loader{Getenv: r.d.getenv}.Load(r.home)
	if err != nil {
		// Load's errors never carry a secret.
		msg := err.Error()
		if detail, fix, found := splitFix(msg); found {
			return fail(detail, fix)
		}
		if errors.Is(err, config.ErrInsecure) {
			// A file that belongs to someone else.
			return fail(msg, fmt.Sprintf("sudo chown %s %s (or whichever file the error names)", r.userName(), path))
		}
		return fail(msg, configFix(msg, path))
	}
	r.cfg = cfg
	if _, err := os.Stat(cfg.Path); errors.Is(err, fs.ErrNotExist) {
		return warn(fmt.Sprintf("%s does not exist; every setting has its default", cfg.Path), "latch init")
	}
	return ok(cfg.Path)
}

// configFix names what to change for a config error: the environment
// variable the error starts with, or else config.toml.
func configFix(msg, path string) string {
	vars := []string{config.EnvAnthropicAPIKey, config.EnvAnthropicBaseURL, config.EnvOpenAIAPIKey, config.EnvOpenAIBaseURL}
	for _, p := range config.Platforms {
		vars = append(vars, p.TokenEnv, p.APIURLEnv)
	}
	for _, env := range vars {
		if strings.HasPrefix(msg, env+":") {
			return "correct or unset " + env
		}
	}
	return "edit " + path
}

func (r *run) checkSecret(context.Context) Check {
	if r.homeErr != nil {
		return skip("no latch home directory")
	}
	path := filepath.Join(r.home, config.SecretFile)
	_, err := config.LoadSecret(r.home)
	switch {
	case err == nil:
		return ok(path)
	case errors.Is(err, fs.ErrNotExist):
		return fail(fmt.Sprintf("%s does not exist", path), "latch init")
	case errors.Is(err, config.ErrInsecure):
		if detail, fix, found := splitFix(err.Error()); found {
			return fail(detail, fix)
		}
		return fail(err.Error(), fmt.Sprintf("sudo chown %s %s", r.userName(), path))
	}
	return fail(err.Error(), fmt.Sprintf("rm %s && latch init (pending pairing codes stop working)", path))
}

// maxCheckErrors bounds the consistency errors shown.
const maxCheckErrors = 3

// checkDatabase opens the store read-only and runs bbolt's consistency
// check. The check cannot be interrupted (the file stays mapped while it
// walks the pages), so it has no timeout of its own; a latch database is
// small enough for that to take milliseconds.
func (r *run) checkDatabase(context.Context) Check {
	if r.homeErr != nil {
		return skip("no latch home directory")
	}
	path := config.DBPath(r.home)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return skip(fmt.Sprintf("%s does not exist yet; latch run creates it", path))
	}
	db, err := store.Open(path, store.Options{ReadOnly: true})
	switch {
	case errors.Is(err, store.ErrLocked):
		return skip("in use by the running daemon (or latch chat); not checked while it runs")
	case errors.Is(err, store.ErrNewerSchema):
		return fail(err.Error(), "run the latch version that wrote it, or a newer one")
	case errors.Is(err, fs.ErrPermission):
		return fail(err.Error(), fmt.Sprintf("sudo chown %s %s", r.userName(), path))
	case err != nil:
		return fail(err.Error(), moveAside(path))
	}
	defer db.Close()
	var problems []string
	n := 0
	err = db.Bolt().View(func(tx *bolt.Tx) error {
		// The channel must be drained to the end: the checker's goroutine
		// holds the transaction until it has sent everything.
		for err := range tx.Check() {
			n++
			if len(problems) < maxCheckErrors {
				problems = append(problems, err.Error())
			}
		}
		return nil
	})
	if err != nil {
		return fail(fmt.Sprintf("%s: %v", path, err), moveAside(path))
	}
	if n > 0 {
		more := ""
		if n > len(problems) {
			more = fmt.Sprintf(" (and %d more)", n-len(problems))
		}
		return fail(fmt.Sprintf("%s is damaged: bbolt's consistency check found %s: %s%s", path, count(n, "error"), strings.Join(problems, "; "), more),
			moveAside(path))
	}
	return ok(path + " (consistent)")
}

func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// moveAside is the fix for a database latch cannot use.
func moveAside(path string) string {
	return fmt.Sprintf("stop latch, restore %s from a backup or move it aside (mv %s %s.broken); "+
		"latch run then starts a new one, without the latch, the pending code or the conversations", path, path, path)
}

func (r *run) checkDaemon(ctx context.Context) Check {
	if r.homeErr != nil {
		return skip("no latch home directory")
	}
	st, err := control.NewClient(config.SocketPath(r.home)).Status(ctx)
	switch {
	case errors.Is(err, control.ErrNoDaemon):
		return warn("not running", "latch run (in the foreground), or latch service install (under systemd)")
	case errors.Is(err, context.DeadlineExceeded):
		return fail(fmt.Sprintf("the daemon did not answer on %s within %s", config.SocketPath(r.home), r.d.timeout()),
			"look at latch logs, then restart it (systemctl --user restart latch.service, or stop and start latch run)")
	case err != nil:
		return fail(err.Error(), "look at latch logs, then restart it (systemctl --user restart latch.service, or stop and start latch run)")
	}
	r.daemonUp, r.daemon = true, st
	detail := fmt.Sprintf("running (pid %d, version %s", st.PID, st.Version)
	if !st.StartedAt.IsZero() {
		detail += fmt.Sprintf(", up %s", r.d.now().Sub(st.StartedAt).Round(time.Second))
	}
	detail += ")" + r.daemonGateways(st)
	if r.cfg != nil {
		if c, missing := r.missingGateways(ctx, st, detail); missing {
			return c
		}
	}
	for _, g := range st.Gateways {
		if g.Configured && !g.Connected && g.LastError != "" {
			return warn(fmt.Sprintf("%s; %s is not connected: %s", detail, g.Name, g.LastError), "look at latch logs")
		}
	}
	if c, drift := r.endpointDrift(ctx, st, detail); drift {
		return c
	}
	if st.Commands != "" && st.Commands != control.CommandsInCgroups {
		// A process that replaces itself fast enough can outrun the walk.
		return warn(fmt.Sprintf("%s; its commands are not in cgroups of their own (%s), so a process can outrun the kill that ends them", detail, st.Commands),
			"run latch as its service: latch service install (its unit has Delegate=yes; reinstall an older one)")
	}
	return ok(detail)
}

func (r *run) checkWorkspace(context.Context) Check {
	if r.cfg == nil {
		return skip("needs a config that loads")
	}
	ws := r.cfg.Agent.Workspace
	where := fmt.Sprintf("or set [agent] workspace in %s to another directory", r.cfg.Path)
	fi, err := os.Stat(ws)
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, unix.ENOTDIR):
		return creatable(ws, where)
	case err != nil:
		return fail(err.Error(), fmt.Sprintf("make %s reachable for you, %s", ws, where))
	case !fi.IsDir():
		return fail(fmt.Sprintf("%s is not a directory", ws), fmt.Sprintf("move %s aside, %s", ws, where))
	}
	f, err := os.CreateTemp(ws, ".latch-doctor-*")
	if err != nil {
		return fail(fmt.Sprintf("%s is not writable: %v", ws, unwrapPath(err)), fmt.Sprintf("chmod u+rwx %s, %s", ws, where))
	}
	name := f.Name()
	f.Close()
	if err := os.Remove(name); err != nil {
		return fail(fmt.Sprintf("%s: cannot remove a file: %v", ws, unwrapPath(err)), fmt.Sprintf("chmod u+rwx %s, %s", ws, where))
	}
	return ok(ws + " (writable)")
}

// creatable checks, without creating anything, that latch run could create
// the missing directory ws: its nearest existing ancestor must be a
// directory this user may write to.
func creatable(ws, where string) Check {
	anc := filepath.Dir(ws)
	for {
		fi, err := os.Stat(anc)
		if err == nil {
			if !fi.IsDir() {
				return fail(fmt.Sprintf("%s does not exist and cannot be created: %s is not a directory", ws, anc),
					fmt.Sprintf("move %s aside, %s", anc, where))
			}
			break
		}
		// ENOTDIR: a file sits higher up; the loop finds it.
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, unix.ENOTDIR) {
			return fail(fmt.Sprintf("%s does not exist and cannot be created: %v", ws, err),
				fmt.Sprintf("make %s reachable for you, %s", anc, where))
		}
		next := filepath.Dir(anc)
		if next == anc {
			break
		}
		anc = next
	}
	if err := unix.Access(anc, unix.W_OK|unix.X_OK); err != nil {
		return fail(fmt.Sprintf("%s does not exist and cannot be created: %s is not writable for you", ws, anc),
			fmt.Sprintf("mkdir -p %s as a user who may, and chown it to you, %s", ws, where))
	}
	return ok(ws + " does not exist yet; latch run creates it")
}

// unwrapPath drops the operation and path a *fs.PathError repeats.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

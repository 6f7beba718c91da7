package service

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
)

// ErrNotInstalled is returned by Uninstall when there is no unit file.
var ErrNotInstalled = errors.New("latch.service is not installed")

// ErrNoSystemd is returned when systemctl, journalctl or loginctl is not
// on $PATH: the machine does not run systemd.
var ErrNoSystemd = errors.New("systemd tools not found (latch service needs systemd)")

// SystemUnitDir is where Install puts a system unit.
const SystemUnitDir = "/etc/systemd/system"

// Command is one external command for a Runner. Stdout and Stderr may be
// nil, which discards the output.
type Command struct {
	Name   string
	Args   []string
	Stdout io.Writer
	Stderr io.Writer
}

// String renders the command line for messages.
func (c Command) String() string {
	return strings.Join(append([]string{c.Name}, c.Args...), " ")
}

// Runner runs c to completion. A command that ran and failed returns an
// error whose ExitCode reports its exit status.
type Runner func(ctx context.Context, c Command) error

// Exec is the Runner that starts real processes.
func Exec(ctx context.Context, c Command) error {
	cmd := exec.CommandContext(ctx, c.Name, c.Args...)
	cmd.Stdout, cmd.Stderr = c.Stdout, c.Stderr
	err := cmd.Run()
	if errors.Is(err, exec.ErrNotFound) {
		return fmt.Errorf("%s: %w", c.Name, ErrNoSystemd)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", c, err)
	}
	return nil
}

// ExitCode returns the exit status carried by an error from a Runner, and
// false when the command did not run to an exit (or err is nil).
func ExitCode(err error) (int, bool) {
	var e interface{ ExitCode() int }
	if errors.As(err, &e) && e.ExitCode() >= 0 {
		return e.ExitCode(), true
	}
	return 0, false
}

// UnitPath returns where the unit file goes: /etc/systemd/system for a
// system unit, $XDG_CONFIG_HOME/systemd/user (default ~/.config/systemd/user)
// for a user unit. A relative XDG_CONFIG_HOME is ignored, as the XDG spec
// asks.
//
// systemd --user reads XDG_CONFIG_HOME from its own environment, not from
// the shell's: a value set only in a shell profile is not seen by it, and
// enable then fails with "Unit file latch.service does not exist".
func UnitPath(system bool) (string, error) {
	if system {
		return filepath.Join(SystemUnitDir, UnitName), nil
	}
	dir := os.Getenv("XDG_CONFIG_HOME")
	if !filepath.IsAbs(dir) {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("find the user unit directory: %w", err)
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "systemd", "user", UnitName), nil
}

// Manager installs, removes and inspects latch.service in one service
// manager: the user's own (systemctl --user) or the system's.
type Manager struct {
	// System selects the system service manager.
	System bool
	// Path is the unit file; empty means UnitPath(System).
	Path string
	// Run runs systemctl, journalctl and loginctl; nil means Exec.
	Run Runner
	// Stdout and Stderr receive what those commands print; nil discards it.
	Stdout, Stderr io.Writer
	// Trace, when set, gets a line for each step of Install and Uninstall:
	// "wrote PATH", "removed PATH", and "$ command" before each command.
	Trace io.Writer
	// User is the login whose lingering Install checks for a user unit;
	// empty means $USER, then the current user.
	User string
}

// InstallOptions adjusts Install.
type InstallOptions struct {
	// NoStart writes the unit and reloads systemd but neither enables nor
	// starts it.
	NoStart bool
}

// InstallResult says what Install did.
type InstallResult struct {
	Path     string // the unit file
	Replaced bool   // a different unit was there before
	Written  bool   // false when the same unit was already installed
	Started  bool   // enabled and started (or restarted)
	// Restarted is set when latch.service was already running and was
	// restarted, so that it now runs the unit and binary just installed.
	Restarted bool
	// LingerHint is set for a user unit when the user manager stops at
	// logout: the command that keeps latch running.
	LingerHint string
}

// Install writes unit (mode 0644, creating the directory), reloads systemd,
// and, unless opts.NoStart, enables and starts latch.service. When the
// service already runs it is restarted, so the new unit takes effect at
// once, and so does a new binary at the same path (an upgrade leaves the
// unit as it was, and enable --now would leave the old latch running).
func (m *Manager) Install(ctx context.Context, unit string, opts InstallOptions) (*InstallResult, error) {
	path, err := m.path()
	if err != nil {
		return nil, err
	}
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read the installed unit: %w", err)
	}
	existed := err == nil
	res := &InstallResult{Path: path, Written: !existed || string(old) != unit}
	res.Replaced = existed && res.Written
	if res.Written {
		if err := writeUnit(path, unit); err != nil {
			return nil, err
		}
		m.trace("wrote %s", path)
	} else {
		m.trace("%s is up to date", path)
	}
	if err := m.systemctl(ctx, "daemon-reload"); err != nil {
		return res, err
	}
	if !opts.NoStart {
		active := m.active(ctx)
		if res.Replaced || active {
			// enable --now would leave a running latch on the old unit
			// or the old binary.
			err = m.systemctl(ctx, "enable", UnitName)
			if err == nil {
				err = m.systemctl(ctx, "restart", UnitName)
			}
		} else {
			err = m.systemctl(ctx, "enable", "--now", UnitName)
		}
		if err != nil {
			return res, err
		}
		res.Started, res.Restarted = true, active
	}
	if !m.System {
		res.LingerHint = m.lingerHint(ctx)
	}
	return res, nil
}

// Uninstall stops and disables latch.service, removes the unit file and
// reloads systemd. It returns ErrNotInstalled when there is no unit file,
// and keeps the file when systemd could not disable the service.
func (m *Manager) Uninstall(ctx context.Context) error {
	path, err := m.path()
	if err != nil {
		return err
	}
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w (no %s)", ErrNotInstalled, path)
	}
	if err := m.systemctl(ctx, "disable", "--now", UnitName); err != nil {
		return err
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("remove the unit: %w", err)
	}
	m.trace("removed %s", path)
	return m.systemctl(ctx, "daemon-reload")
}

// Status runs systemctl status for latch.service, printing to Stdout. Its
// error carries systemctl's exit status (3: not running, 4: no such unit).
func (m *Manager) Status(ctx context.Context) error {
	return m.run(ctx, Command{Name: "systemctl", Args: m.scope("status", UnitName)})
}

// Logs runs journalctl for latch.service, printing to Stdout; with follow
// it keeps printing new lines until ctx ends or journalctl is interrupted.
func (m *Manager) Logs(ctx context.Context, follow bool) error {
	args := m.scope("-u", UnitName)
	if follow {
		args = append(args, "-f")
	}
	return m.run(ctx, Command{Name: "journalctl", Args: args})
}

// active reports whether latch.service is running; when systemctl cannot
// tell, it is taken as not running.
func (m *Manager) active(ctx context.Context) bool {
	return m.runner()(ctx, Command{
		Name: "systemctl", Args: m.scope("is-active", "--quiet", UnitName),
		Stdout: io.Discard, Stderr: io.Discard,
	}) == nil
}

// lingerHint returns advice when the user's service manager stops at logout
// (loginctl reports Linger=no), and "" when it does not or cannot tell.
func (m *Manager) lingerHint(ctx context.Context) string {
	name := m.User
	if name == "" {
		name = currentUser()
	}
	var out bytes.Buffer
	err := m.runner()(ctx, Command{
		Name: "loginctl", Args: []string{"show-user", name, "-p", "Linger"},
		Stdout: &out, Stderr: io.Discard,
	})
	if err != nil || strings.TrimSpace(out.String()) != "Linger=no" {
		return ""
	}
	return fmt.Sprintf("latch stops when you log out and starts only when you log in: run "+
		"`sudo loginctl enable-linger %s` so latch keeps running after you log out", name)
}

// currentUser names the user for loginctl: $USER, then the account
// database, then the numeric uid, which loginctl also takes.
func currentUser() string {
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return strconv.Itoa(os.Getuid())
}

func (m *Manager) path() (string, error) {
	if m.Path != "" {
		return m.Path, nil
	}
	return UnitPath(m.System)
}

func (m *Manager) runner() Runner {
	if m.Run == nil {
		return Exec
	}
	return m.Run
}

// scope prefixes args with --user for the user's service manager.
func (m *Manager) scope(args ...string) []string {
	if m.System {
		return args
	}
	return append([]string{"--user"}, args...)
}

// systemctl runs one traced systemctl command.
func (m *Manager) systemctl(ctx context.Context, args ...string) error {
	c := Command{Name: "systemctl", Args: m.scope(args...)}
	m.trace("$ %s", c)
	return m.run(ctx, c)
}

func (m *Manager) trace(format string, args ...any) {
	if m.Trace != nil {
		fmt.Fprintf(m.Trace, format+"\n", args...)
	}
}

func (m *Manager) run(ctx context.Context, c Command) error {
	c.Stdout, c.Stderr = orDiscard(m.Stdout), orDiscard(m.Stderr)
	return m.runner()(ctx, c)
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// writeUnit replaces path with unit, mode 0644, through a temporary file in
// the same directory, so systemd never reads half a unit.
func writeUnit(path, unit string) (err error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create the unit directory: %w", err)
	}
	// The leading dot and the random suffix keep systemd from taking the
	// temporary file for a unit.
	f, err := os.CreateTemp(dir, "."+UnitName+".*")
	if err != nil {
		return fmt.Errorf("write the unit: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err := f.Chmod(0o644); err != nil {
		return fmt.Errorf("write the unit: %w", err)
	}
	if _, err := f.WriteString(unit); err != nil {
		return fmt.Errorf("write the unit: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("write the unit: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write the unit: %w", err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("write the unit: %w", err)
	}
	return nil
}

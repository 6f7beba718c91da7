// Package service runs latch under systemd: it renders the latch.service
// unit, installs and removes it through systemctl, shows its status and logs
// through systemctl and journalctl, tells which secrets latch loads from
// the environment the service will not have, and speaks the sd_notify
// protocol (readiness, status line, watchdog) for the daemon.
//
// Every external command goes through a [Runner], so tests never touch the
// real service manager.
package service

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"
)

// UnitName is the name of the unit in both service managers.
const UnitName = "latch.service"

// DefaultShutdownGrace is how long latch is given to stop the commands it
// started when UnitOptions.ShutdownGrace is zero.
const DefaultShutdownGrace = 20 * time.Second

// stopMargin is added to the shutdown grace for TimeoutStopSec, so systemd
// only sends SIGKILL once latch has had its full grace and time to exit.
const stopMargin = 10 * time.Second

// UnitOptions describes the unit Unit renders.
type UnitOptions struct {
	// ExecPath is the absolute path of the latch binary.
	ExecPath string
	// Home is $LATCH_HOME, absolute; empty leaves it unset, so latch uses
	// ~/.latch of the user it runs as.
	Home string
	// SearchPath is $PATH for latch and every command it runs (the chat's
	// !cmd, the agent's tools): absolute directories joined by ':'. Empty
	// leaves PATH to the service manager, whose default lacks the user's
	// own directories (~/.local/bin, ~/go/bin).
	SearchPath string
	// System renders a unit for the system service manager
	// (/etc/systemd/system) that runs as User, instead of one for the
	// user's own service manager.
	System bool
	// User is the account a system unit runs as; required with System and
	// refused without it (a user unit always runs as its owner).
	User string
	// Harden adds the sandboxing settings described in HardenTradeoff.
	Harden bool
	// ShutdownGrace is how long latch takes to stop the commands it started
	// on SIGTERM; zero means DefaultShutdownGrace. TimeoutStopSec is this
	// plus 10s.
	ShutdownGrace time.Duration
}

// HardenTradeoff says what --harden costs; it is printed by the CLI and
// written as a comment into the hardened unit.
const HardenTradeoff = `Hardening (latch service install --harden). What it costs:
- The agent can no longer use sudo, su or pkexec: NoNewPrivileges and
  RestrictSUIDSGID stop setuid programs from gaining privileges. This also
  breaks tools built on setuid helpers, such as rootless podman (newuidmap).
- /usr, /boot and /etc are read-only to latch and every command it runs
  (ProtectSystem=full), and so are /proc/sys and /sys, the cgroup tree
  too but for the service's own cgroup, where latch gives each command a
  cgroup of its own; kernel modules cannot be loaded.
- /tmp and /var/tmp are private to the service: what the agent leaves there
  is not in the /tmp you see.
ProtectHome is deliberately not set: $LATCH_HOME and the workspace live in
your home, and working on your files is what the agent is for. To confine it
further, add ProtectHome=read-only plus ReadWritePaths= for the directories
it may change, in a drop-in.`

// userHardenNote explains why a hardened user unit also sets PrivateUsers.
const userHardenNote = `In a user service systemd can apply these protections only inside a user
namespace (systemd.exec(5)), so PrivateUsers=yes is set too; without it they
would not take effect. That needs unprivileged user namespaces: if latch
then fails to start, see latch service status, or install a system service
instead (sudo latch service install --system --user NAME --harden).`

// Unit renders the systemd unit for opts.
//
// The unit is written out with plain string building rather than
// text/template: executing a template reaches reflect.Value.MethodByName,
// which makes the linker keep every exported method of every type in the
// binary, and that code is mapped into the daemon too.
func Unit(opts UnitOptions) (string, error) {
	d, err := newUnitData(opts)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	w := func(parts ...string) {
		for _, p := range parts {
			b.WriteString(p)
		}
	}
	w(`# latch.service, written by latch service install.
# Re-run that command to change it. Local additions belong in a drop-in
# (systemctl `, d.Scope, `edit latch.service), which a re-install keeps.

[Unit]
Description=latch: text a local agent from your chat
Documentation=https://github.com/latchd/latch
After=network-online.target
Wants=network-online.target

[Service]
# latch reports readiness and pings the watchdog over sd_notify. Only the
# main process may: a command the agent runs cannot fake either.
Type=notify
NotifyAccess=main
ExecStart=`, d.ExecStart, " run\n", `# systemctl reload: SIGHUP reloads config.toml (an invalid one is refused
# and the running configuration kept); latch tells systemd RELOADING=1,
# then READY=1.
ExecReload=kill -HUP $MAINPID
`)
	for _, e := range d.Environment {
		w("Environment=", e, "\n")
	}
	if d.User != "" {
		w("User=", d.User, "\n")
	}
	w(`# Exit status 78 (EX_CONFIG) means a bad token or configuration: restarting
# cannot fix it, so it must not become a crash loop.
Restart=on-failure
RestartSec=5s
RestartPreventExitStatus=78
WatchdogSec=30
# On stop, SIGTERM goes to latch alone (KillMode=mixed): latch stops the
# commands it started, each in a session of its own, in its own order.
# Whatever is left in the service's cgroup gets SIGKILL once latch exits, or
# after TimeoutStopSec (latch's `, d.Grace, ` grace plus 10s). The default,
# control-group, would SIGTERM those commands at the same moment as latch
# and race its shutdown; process would leave escaped processes running.
KillMode=mixed
TimeoutStopSec=`, d.TimeoutStop, `
# latch puts each command it runs in a cgroup of its own below the
# service's, so that ending the command kills every process it started,
# however fast they fork; systemd must delegate that subtree to latch.
Delegate=yes
`)
	if d.Harden {
		w("\n", d.HardenComment, "\nNoNewPrivileges=yes\nPrivateTmp=yes\n")
		if d.PrivateUsers {
			w("PrivateUsers=yes\n")
		}
		w(`ProtectSystem=full
ProtectKernelModules=yes
ProtectKernelTunables=yes
ProtectControlGroups=yes
`)
		// ProtectKernelTunables= leaves the cgroup tree writable;
		// ProtectControlGroups= makes it read-only, and the service's own
		// cgroup is opened again, where latch makes one per command: the
		// unified hierarchy, then a hybrid one's. "-": a path that is not
		// there (another layout) is skipped.
		for _, root := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
			for _, p := range d.CgroupPaths {
				w("ReadWritePaths=-", root, p, "\n")
			}
		}
		w(`RestrictSUIDSGID=yes
LockPersonality=yes
`)
	}
	w("\n[Install]\nWantedBy=", d.WantedBy, "\n")
	return b.String(), nil
}

// unitData is what Unit writes; every string in it is already escaped for
// the unit file.
type unitData struct {
	Scope         string // "--user " or "" for the systemctl hint
	ExecStart     string
	Environment   []string
	User          string
	Grace         string
	TimeoutStop   string
	Harden        bool
	HardenComment string
	PrivateUsers  bool
	WantedBy      string
	// CgroupPaths are where the service's cgroup may be, below the root
	// of the cgroup tree.
	CgroupPaths []string
}

func newUnitData(opts UnitOptions) (unitData, error) {
	exec, err := checkPath("executable path", opts.ExecPath)
	if err != nil {
		return unitData{}, err
	}
	if exec == "" {
		return unitData{}, errors.New("executable path: empty")
	}
	// systemd refuses an executable whose name holds a quote or a
	// backslash ("contains special characters"). $ is not special in the
	// path itself, but systemd expands ${NAME} in argv[0], which is derived
	// from it; refuse rather than guess.
	if i := strings.IndexAny(exec, `"'\$`); i >= 0 {
		return unitData{}, fmt.Errorf("executable path %q: systemd cannot run a program whose path contains %c; move latch elsewhere", exec, exec[i])
	}
	home, err := checkPath("LATCH_HOME", opts.Home)
	if err != nil {
		return unitData{}, err
	}
	grace := opts.ShutdownGrace
	if grace < 0 {
		return unitData{}, fmt.Errorf("shutdown grace %s: negative", grace)
	}
	if grace == 0 {
		grace = DefaultShutdownGrace
	}
	d := unitData{
		Scope:        "--user ",
		ExecStart:    quoteWord(exec),
		Grace:        formatSeconds(grace),
		TimeoutStop:  formatSeconds(grace + stopMargin),
		Harden:       opts.Harden,
		PrivateUsers: opts.Harden && !opts.System,
		WantedBy:     "default.target",
		// %U is the user's uid in a user unit. Newer user managers put
		// services in app.slice.
		CgroupPaths: []string{"/user.slice/user-%U.slice/user@%U.service/app.slice/latch.service",
			"/user.slice/user-%U.slice/user@%U.service/latch.service"},
	}
	if home != "" {
		d.Environment = append(d.Environment, quoteWord("LATCH_HOME="+home))
	}
	if opts.SearchPath != "" {
		if err := checkSearchPath(opts.SearchPath); err != nil {
			return unitData{}, err
		}
		d.Environment = append(d.Environment, quoteWord("PATH="+opts.SearchPath))
	}
	switch {
	case opts.System:
		if err := checkUser(opts.User); err != nil {
			return unitData{}, err
		}
		d.Scope, d.User, d.WantedBy = "", opts.User, "multi-user.target"
		d.CgroupPaths = []string{"/system.slice/latch.service"}
	case opts.User != "":
		return unitData{}, errors.New("a user unit always runs as its owner; User is only for a system unit")
	}
	if opts.Harden {
		note := HardenTradeoff
		if d.PrivateUsers {
			note += "\n" + userHardenNote
		}
		d.HardenComment = comment(note)
	}
	return d, nil
}

// checkPath returns p cleaned, or an error if it is set but not absolute or
// holds something a unit file cannot carry. An empty p is returned as is.
func checkPath(what, p string) (string, error) {
	if p == "" {
		return "", nil
	}
	if !filepath.IsAbs(p) {
		return "", fmt.Errorf("%s %q: not absolute", what, p)
	}
	if !utf8.ValidString(p) {
		return "", fmt.Errorf("%s %q: not valid UTF-8", what, p)
	}
	if i := strings.IndexFunc(p, unicode.IsControl); i >= 0 {
		return "", fmt.Errorf("%s %q: contains a control character", what, p)
	}
	return filepath.Clean(p), nil
}

// checkSearchPath refuses a PATH with an entry that is empty or relative:
// either would make the commands latch runs search the directory they run
// in (the workspace, which the agent writes), not a fixed one.
func checkSearchPath(p string) error {
	for dir := range strings.SplitSeq(p, ":") {
		if dir == "" {
			return fmt.Errorf("PATH %q: an empty entry means the current directory; remove it", p)
		}
		if _, err := checkPath("PATH entry", dir); err != nil {
			return err
		}
	}
	return nil
}

// userName matches the user names and numeric ids systemd takes in User=
// without quoting or specifiers.
var userName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,255}$`) })

func checkUser(u string) error {
	switch {
	case u == "":
		return errors.New("a system unit needs the user latch runs as (--user NAME)")
	case !userName().MatchString(u) || u == "." || u == "..":
		return fmt.Errorf("user %q: not a valid user name", u)
	}
	return nil
}

// quoteWord escapes s as one word of a setting that systemd splits into
// words, C-unescapes and then expands %-specifiers in (ExecStart=,
// Environment=): backslash and double quote are escaped, % is doubled, and
// the word is double-quoted when it holds a blank or a quote.
func quoteWord(s string) string {
	var b strings.Builder
	quote := false
	for _, r := range s {
		switch r {
		case '\\', '"':
			b.WriteByte('\\')
		case '%':
			b.WriteByte('%')
		case ' ', '\t', '\'':
			quote = true
		}
		b.WriteRune(r)
	}
	if quote || strings.Contains(s, `"`) {
		return `"` + b.String() + `"`
	}
	return b.String()
}

// formatSeconds renders d as whole seconds, rounded up, in systemd's time
// span syntax.
func formatSeconds(d time.Duration) string {
	return fmt.Sprintf("%ds", int64(math.Ceil(d.Seconds())))
}

// comment turns text into unit-file comment lines.
func comment(text string) string {
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight("# "+l, " ")
	}
	return strings.Join(lines, "\n")
}

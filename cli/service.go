package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/latchd/latch/agent/mcp"
	"github.com/latchd/latch/config"
	"github.com/latchd/latch/daemon"
	"github.com/latchd/latch/service"
)

// serviceDeps is what the service and logs commands take from the machine;
// tests replace them so they never run systemctl.
type serviceDeps struct {
	run service.Runner
	// executable is the running binary with symlinks resolved
	// (os.Executable); arg0 and lookPath find the path it was started by.
	executable func() (string, error)
	arg0       string
	lookPath   func(string) (string, error)
}

func realServiceDeps() serviceDeps {
	return serviceDeps{run: service.Exec, executable: os.Executable, arg0: os.Args[0], lookPath: exec.LookPath}
}

func newServiceCmd() *cobra.Command { return newServiceCmdWith(realServiceDeps()) }

func newServiceCmdWith(deps serviceDeps) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "service",
		Short: "Run latch as a systemd service",
		Long: "service installs latch.service for your own systemd user manager (the default)\n" +
			"or, with --system, for the system manager, running as --user NAME.",
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newServiceInstallCmd(deps), newServiceUninstallCmd(deps), newServiceStatusCmd(deps))
	return cmd
}

// installFlags are the flags of latch service install.
type installFlags struct {
	system, noStart, printOnly, harden, allowMissingEnv bool
	userName, searchPath                                string
	searchPathSet                                       bool
}

func newServiceInstallCmd(deps serviceDeps) *cobra.Command {
	var fl installFlags
	cmd := &cobra.Command{
		Use:   "install",
		Short: "Write latch.service, then enable and start it",
		Long: "install writes latch.service for this latch binary, reloads systemd and runs\n" +
			"`systemctl enable --now latch.service`, or restarts it when it already runs, so\n" +
			"an upgraded binary takes over. Without --system it is a user service in\n" +
			"~/.config/systemd/user; with --system --user NAME a system service in\n" +
			"/etc/systemd/system that runs as NAME (needs root). --harden adds a sandbox;\n" +
			"read what it costs before you use it.\n\n" +
			"A service does not inherit your shell's environment: install refuses when the\n" +
			"bot token, the API key or an API URL (LATCH_TELEGRAM_API_URL, OPENAI_BASE_URL\n" +
			"and the like) comes only from an environment variable the service will not\n" +
			"have, and says how to give it one. A user service gets this shell's PATH, so\n" +
			"the commands the chat runs find what you find (--path to choose).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fl.searchPathSet = cmd.Flags().Changed("path")
			return runServiceInstall(cmd, deps, fl)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&fl.system, "system", false, "install a system service (/etc/systemd/system; needs root and --user)")
	f.StringVar(&fl.userName, "user", "", "the account a system service runs as")
	f.BoolVar(&fl.noStart, "no-start", false, "write the unit and reload systemd, but do not enable or start it")
	f.BoolVar(&fl.printOnly, "print", false, "print the unit and change nothing")
	f.BoolVar(&fl.harden, "harden", false, "add systemd sandboxing (the agent can no longer use sudo; /usr and /etc become read-only)")
	f.StringVar(&fl.searchPath, "path", "", "PATH for latch and the commands it runs (default: this shell's for a user service, systemd's for a system service; --path= for systemd's)")
	f.BoolVar(&fl.allowMissingEnv, "allow-missing-env", false, "install and start even though the service will lack a token, API key or API URL that only this shell's environment has")
	return cmd
}

func runServiceInstall(cmd *cobra.Command, deps serviceDeps, fl installFlags) error {
	out, errOut := cmd.OutOrStdout(), cmd.ErrOrStderr()
	if fl.userName != "" && !fl.system {
		return errors.New("--user names the account a system service runs as and needs --system; a user service always runs as you")
	}
	exe, err := latchBinary(deps)
	if errors.Is(err, errTempBinary) && fl.printOnly {
		fmt.Fprintln(errOut, "latch: warning:", err)
	} else if err != nil {
		return err
	}
	home, err := serviceHome(fl.system, fl.userName)
	if err != nil {
		return err
	}
	searchPath := fl.searchPath
	if !fl.searchPathSet && !fl.system {
		var dropped []string
		searchPath, dropped = shellSearchPath(os.Getenv("PATH"))
		if len(dropped) > 0 && !fl.printOnly {
			fmt.Fprintf(errOut, "latch: warning: left out of the service's PATH, as they are not absolute: %s\n", strings.Join(dropped, ", "))
		}
	}
	// systemd's stop timeout follows [agent] shutdown_grace; a config that
	// does not load is reported below, and gets the default.
	var grace time.Duration
	if cfg, err := config.Load(home); err == nil {
		grace = cfg.Agent.ShutdownGrace
		warnMissingSidecar(errOut, cfg, exe)
		warnMissingLinked(errOut, cfg, exe)
	}
	unit, err := service.Unit(service.UnitOptions{
		ExecPath: exe, Home: home, SearchPath: searchPath, System: fl.system, User: fl.userName, Harden: fl.harden,
		ShutdownGrace: grace,
	})
	if err != nil {
		return err
	}
	if fl.printOnly {
		_, err := io.WriteString(out, unit)
		return err
	}
	if !fl.system && os.Geteuid() == 0 {
		fmt.Fprintln(errOut, "latch: warning: installing a user service for root; to run latch as another user, use --system --user NAME")
	}
	if fl.userName == "root" || fl.userName == "0" {
		fmt.Fprintln(errOut, "latch: warning: latch will run as root, and so will every command the chat sends")
	}
	m := &service.Manager{System: fl.system, Run: deps.run, Stdout: out, Stderr: errOut, Trace: out}
	if err := checkServiceEnv(cmd.Context(), m, errOut, home, fl); err != nil {
		return err
	}
	res, err := m.Install(cmd.Context(), unit, service.InstallOptions{NoStart: fl.noStart})
	if err != nil {
		return installError(err, fl.system)
	}
	printInstalled(out, res, exe, searchPath, fl)
	return nil
}

// checkServiceEnv loads the config as the service will, with only the
// environment systemd gives it, and refuses (unless --no-start or
// --allow-missing-env, which only warn) when a token or API key would be
// missing, or an API URL would differ. Without a token or key the service
// would start and report itself ready without the gateway or the model,
// and latch pair would then fail with "unknown gateway". Without an API
// URL it would be worse: it would send the chat, and the token or key with
// it, to another server than the one this shell names (api.openai.com
// instead of a local model). A system service that runs as someone else is
// not checked: its config is theirs to read.
func checkServiceEnv(ctx context.Context, m *service.Manager, errOut io.Writer, home string, fl installFlags) error {
	if fl.system && !runsAsMe(fl.userName) {
		return nil
	}
	env, err := m.Environment(ctx)
	if err != nil {
		fmt.Fprintf(errOut, "latch: warning: could not ask systemd which environment latch.service gets, so the tokens, API key and API URLs were not checked: %v\n", err)
		return nil
	}
	for _, f := range env.Unread {
		fmt.Fprintf(errOut, "latch: warning: cannot read %s, an EnvironmentFile of latch.service, so the tokens, API key and API URLs were not checked\n", f)
	}
	secrets, err := service.LackingSecrets(home, os.Getenv, env)
	var settings []service.EnvSetting
	if err == nil {
		settings, err = service.LackingSettings(home, os.Getenv, env)
	}
	if err != nil {
		fmt.Fprintf(errOut, "latch: warning: the config does not load: %v\n(latch doctor says how to fix it; the service cannot start until then)\n", err)
		return nil
	}
	if len(secrets) == 0 && len(settings) == 0 {
		return nil
	}
	advice := envAdvice(secrets, settings, home, fl)
	if fl.noStart || fl.allowMissingEnv {
		fmt.Fprintf(errOut, "latch: warning: %s\n", advice)
		return nil
	}
	return fmt.Errorf("%s\nTo install and start it anyway, without them: %s --allow-missing-env", advice, installCommand(fl))
}

// envAdvice says which secrets the service will lack and which API URLs
// it will not share with this shell, and the two ways to give it them. It
// names variables, never their values: a URL may carry a credential too.
func envAdvice(secrets []service.EnvSecret, settings []service.EnvSetting, home string, fl installFlags) string {
	var b strings.Builder
	var vars []string
	if len(secrets) > 0 {
		var whats, names []string
		for _, s := range secrets {
			names, whats = append(names, s.Var), append(whats, s.What)
		}
		vars = append(vars, names...)
		fmt.Fprintf(&b, "latch.service would run without %s: %s %s only from this shell's environment, "+
			"which a service does not inherit.\n", strings.Join(whats, " and "), strings.Join(names, " and "), comeVerb(names))
	}
	if len(settings) > 0 {
		var whats, names []string
		for _, s := range settings {
			names = append(names, s.Var)
			if !slices.Contains(whats, s.What) {
				whats = append(whats, s.What)
			}
		}
		vars = append(vars, names...)
		fmt.Fprintf(&b, "latch.service would run without this shell's %s: %s %s only from this shell's environment, "+
			"which a service does not inherit, so the service would send the chat, with the token or key, "+
			"to the server config.toml or the default names instead.\n", strings.Join(whats, " and "), strings.Join(names, " and "), comeVerb(names))
	}
	fmt.Fprintf(&b, "Give the service what it needs in one of two ways, then run %s again:\n", installCommand(fl))
	b.WriteString("  1. in " + filepath.Join(home, config.ConfigFile) + ":\n")
	for _, s := range secrets {
		file := filepath.Join(home, secretFileName(s.Var))
		table, key, _ := strings.Cut(s.FileKey, " ")
		fmt.Fprintf(&b, "       a file only you can read: (umask 077; printenv %s > %s)\n", s.Var, shellQuote(file))
		fmt.Fprintf(&b, "       and under %s: %s = %q\n", table, key, file)
	}
	for _, s := range settings {
		table, key, _ := strings.Cut(s.Key, " ")
		fmt.Fprintf(&b, "       under %s: %s = the URL that printenv %s prints\n", table, key, s.Var)
	}
	envFile := filepath.Join(home, "service.env")
	systemctl := "systemctl --user"
	if fl.system {
		systemctl = "sudo systemctl"
	}
	b.WriteString("  2. an environment file for the service:\n")
	for _, v := range vars {
		fmt.Fprintf(&b, "       (umask 077; printenv | grep '^%s=' >> %s)\n", v, shellQuote(envFile))
	}
	fmt.Fprintf(&b, "       %s --no-start\n", installCommand(fl))
	fmt.Fprintf(&b, "       %s edit %s   and add: [Service] EnvironmentFile=%s", systemctl, service.UnitName, strings.ReplaceAll(envFile, "%", "%%"))
	return b.String()
}

// comeVerb agrees "come" with a list of variables.
func comeVerb(vars []string) string {
	if len(vars) > 1 {
		return "come"
	}
	return "comes"
}

// secretFileName is where envAdvice suggests keeping the secret of v.
func secretFileName(v string) string {
	for _, p := range config.Platforms {
		for _, s := range p.Secrets {
			if s.Env == "" || v != s.Env {
				continue
			}
			if s.Key == "token" {
				return p.Name + ".token"
			}
			return p.Name + "-" + strings.TrimSuffix(s.Key, "_token") + ".token"
		}
	}
	return "api.key"
}

// installCommand is the install command line for advice.
func installCommand(fl installFlags) string {
	if fl.system {
		return "sudo latch service install --system --user " + fl.userName
	}
	return "latch service install"
}

// runsAsMe reports whether the account name is the one running install.
func runsAsMe(name string) bool {
	u, err := user.Lookup(name)
	return err == nil && u.Uid == strconv.Itoa(os.Geteuid())
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+,:@") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// shellSearchPath is the PATH a user service gets by default: the
// installer's, without the entries that are empty or relative (they would
// search whatever directory a command runs in) or that a unit cannot carry,
// and without repeats. dropped lists the non-empty entries left out.
func shellSearchPath(p string) (path string, dropped []string) {
	var keep []string
	seen := make(map[string]bool)
	for dir := range strings.SplitSeq(p, ":") {
		switch {
		case dir == "":
		case !filepath.IsAbs(dir) || !utf8.ValidString(dir) || strings.IndexFunc(dir, unicode.IsControl) >= 0:
			dropped = append(dropped, strconv.Quote(dir))
		case !seen[filepath.Clean(dir)]:
			seen[filepath.Clean(dir)] = true
			keep = append(keep, filepath.Clean(dir))
		}
	}
	return strings.Join(keep, ":"), dropped
}

func printInstalled(w io.Writer, res *service.InstallResult, exe, searchPath string, fl installFlags) {
	kind, systemctl, flag := "user", "systemctl --user", ""
	if fl.system {
		kind, systemctl, flag = "system", "systemctl", " --system"
	}
	fmt.Fprintln(w)
	if res.Restarted {
		fmt.Fprintf(w, "latch.service was running: restarted it, so it now runs %s and this unit.\n", exe)
	}
	if res.Started {
		fmt.Fprintf(w, "latch runs as a %s service. `latch service status%s` shows it; `latch logs -f%s` follows its log.\n", kind, flag, flag)
	} else {
		fmt.Fprintf(w, "latch.service is installed but not started. Start it with: %s enable --now latch.service\n", systemctl)
	}
	if res.LingerHint != "" {
		fmt.Fprintf(w, "\nNote: %s.\n", res.LingerHint)
	}
	if searchPath != "" && !fl.searchPathSet {
		fmt.Fprintln(w, "\nThe commands latch runs get this shell's PATH, written into the unit; after you\n"+
			"change PATH, install again (or choose one with --path).")
	}
	if fl.harden {
		fmt.Fprintf(w, "\n%s\n", service.HardenTradeoff)
		if !fl.system {
			fmt.Fprintln(w, "As a user service it also sets PrivateUsers=yes, which needs unprivileged user\n"+
				"namespaces; if latch then fails to start, use --system --user NAME instead.")
		}
	}
}

// installError adds what to do to a system install that lacks root.
func installError(err error, system bool) error {
	if system && errors.Is(err, fs.ErrPermission) {
		return fmt.Errorf("%w (a system service needs root: sudo latch service install --system --user NAME)", err)
	}
	return err
}

func newServiceUninstallCmd(deps serviceDeps) *cobra.Command {
	var system bool
	cmd := &cobra.Command{
		Use:   "uninstall",
		Short: "Stop and disable latch.service and remove it",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			m := &service.Manager{System: system, Run: deps.run, Stdout: out, Stderr: cmd.ErrOrStderr(), Trace: out}
			err := m.Uninstall(cmd.Context())
			if errors.Is(err, service.ErrNotInstalled) {
				if other, perr := service.UnitPath(!system); perr == nil && exists(other) {
					flag := "with --system"
					if system {
						flag = "without --system"
					}
					return fmt.Errorf("%w; there is one at %s: run this %s", err, other, flag)
				}
			}
			if system && errors.Is(err, fs.ErrPermission) {
				return fmt.Errorf("%w (a system service needs root: sudo latch service uninstall --system)", err)
			}
			return err
		},
	}
	cmd.Flags().BoolVar(&system, "system", false, "remove the system service instead of the user service")
	return cmd
}

func newServiceStatusCmd(deps serviceDeps) *cobra.Command {
	var system bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show systemctl status latch.service",
		Long: "status runs `systemctl [--user] status latch.service` and exits with its\n" +
			"status: 0 running, 3 not running, 4 not installed.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			m := &service.Manager{System: system, Run: deps.run, Stdout: cmd.OutOrStdout(), Stderr: cmd.ErrOrStderr()}
			return exitStatus(m.Status(cmd.Context()))
		},
	}
	cmd.Flags().BoolVar(&system, "system", false, "the system service instead of the user service")
	return cmd
}

// exitStatus turns a command's non-zero exit into latch's own exit status;
// the command has already said what went wrong.
func exitStatus(err error) error {
	if code, ok := service.ExitCode(err); ok {
		return &codeError{code: code}
	}
	return err
}

// errTempBinary marks a latch binary that will not survive: go run's.
var errTempBinary = errors.New("this latch is a temporary build (go run, or a temporary directory)")

// latchBinary returns the absolute path the service should start: the one
// latch was started by, symlinks kept. A package manager (Homebrew, nix)
// keeps such a path stable and points it at a versioned directory that an
// upgrade and cleanup delete, so the resolved path would soon be gone and
// systemd would fail with 203/EXEC every few seconds. When the path it was
// started by cannot be found again, it is the resolved one.
//
// A binary that go run built in a temporary or cache directory is refused,
// whether the path or its target lies there: the service would start a
// file that is soon gone.
func latchBinary(deps serviceDeps) (string, error) {
	exe, err := deps.executable()
	if err != nil {
		return "", fmt.Errorf("find the latch binary: %w", err)
	}
	if exe, err = filepath.Abs(exe); err != nil {
		return "", fmt.Errorf("find the latch binary: %w", err)
	}
	p := exe
	if invoked, ok := invokedPath(deps.arg0, deps.lookPath, exe); ok {
		p = invoked
	}
	target := p
	if resolved, err := filepath.EvalSymlinks(p); err == nil {
		target = resolved
	}
	for _, q := range []string{p, target} {
		if isTempBuild(q) {
			return p, fmt.Errorf("%w that will not last: %s\n"+
				"Build it where it can stay, then install from there:\n"+
				"  go build -o ~/.local/bin/latch ./cmd/latch && ~/.local/bin/latch service install", errTempBinary, q)
		}
	}
	return p, nil
}

// invokedPath returns the absolute path latch was started by, from argv[0]
// (searched in $PATH when it has no slash, as the shell did), if that path
// still names the running binary exe. argv[0] is whatever the caller chose,
// so it is trusted only that far.
func invokedPath(arg0 string, lookPath func(string) (string, error), exe string) (string, bool) {
	if arg0 == "" {
		return "", false
	}
	p := arg0
	if !strings.Contains(arg0, "/") {
		if lookPath == nil {
			return "", false
		}
		// exec.LookPath refuses a match in a relative $PATH entry
		// (exec.ErrDot): the shell's working directory is not the
		// service's.
		found, err := lookPath(arg0)
		if err != nil {
			return "", false
		}
		p = found
	}
	p, err := filepath.Abs(p)
	if err != nil {
		return "", false
	}
	a, err := os.Stat(p)
	if err != nil {
		return "", false
	}
	b, err := os.Stat(exe)
	if err != nil || !os.SameFile(a, b) {
		return "", false
	}
	return p, true
}

// isTempBuild reports whether p lies in the temporary directory, in
// $GOCACHE, or in a go-build directory (where go run puts its binaries, in
// the temporary directory or, since Go 1.24, in the build cache).
func isTempBuild(p string) bool {
	dirs := []string{os.TempDir()}
	if c := os.Getenv("GOCACHE"); c != "" {
		dirs = append(dirs, c)
	}
	for _, d := range dirs {
		if within(d, p) {
			return true
		}
		if r, err := filepath.EvalSymlinks(d); err == nil && within(r, p) {
			return true
		}
	}
	for part := range strings.SplitSeq(filepath.Dir(p), string(filepath.Separator)) {
		if strings.HasPrefix(part, "go-build") {
			return true
		}
	}
	return false
}

func within(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// serviceHome is the LATCH_HOME the unit sets. For a system service run as
// another user it is that user's ~/.latch, not the one of whoever runs
// install (under sudo, root's), unless LATCH_HOME says otherwise.
func serviceHome(system bool, name string) (string, error) {
	if !system || name == "" || os.Getenv(config.EnvHome) != "" {
		return config.HomeDir()
	}
	u, err := user.Lookup(name)
	if err != nil {
		return "", fmt.Errorf("--user %s: %w", name, err)
	}
	if u.HomeDir == "" || !filepath.IsAbs(u.HomeDir) {
		return "", fmt.Errorf("--user %s has no home directory; set LATCH_HOME", name)
	}
	return filepath.Join(u.HomeDir, ".latch"), nil
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// warnMissingLinked says, when a gateway latch does not link is
// configured (Matrix), that the service will not start unless the binary
// that links it (latch-matrix) sits beside exe.
func warnMissingLinked(errOut io.Writer, cfg *config.Config, exe string) {
	if real, err := filepath.EvalSymlinks(exe); err == nil {
		exe = real
	}
	for _, p := range daemon.Unlinked(cfg) {
		bin := filepath.Join(filepath.Dir(exe), p.Binary)
		if fi, err := os.Stat(bin); err != nil || !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0 {
			fmt.Fprintf(errOut, "latch: warning: [%s] is configured, and latch runs it with %s, which is not at %s: the service will not start; "+
				"build it there, in latch's source tree: CGO_ENABLED=0 go build -trimpath -ldflags=\"-s -w\" -o %s ./cmd/%s\n",
				p.Name, p.Binary, bin, filepath.Dir(bin), p.Binary)
		}
	}
}

// warnMissingSidecar says, when MCP servers are enabled, that the service
// will offer none of their tools unless latch-mcp sits beside exe: the
// daemon looks for it beside the binary it runs, symlinks resolved
// (os.Executable).
func warnMissingSidecar(errOut io.Writer, cfg *config.Config, exe string) {
	n := 0
	for _, s := range cfg.MCP.Servers {
		if s.Enabled {
			n++
		}
	}
	if n == 0 {
		return
	}
	if real, err := filepath.EvalSymlinks(exe); err == nil {
		exe = real
	}
	if err := mcp.CheckSidecar(filepath.Join(filepath.Dir(exe), mcp.SidecarName)); err != nil {
		fmt.Fprintf(errOut, "latch: warning: %d MCP server(s) are configured, but %v\n", n, err)
	}
}

package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/latchd/latch/config"
	"github.com/latchd/latch/service"
)

// serviceDeps is what the service and logs commands take from the machine;
// tests replace both so they never run systemctl.
type serviceDeps struct {
	run        service.Runner
	executable func() (string, error)
}

func realServiceDeps() serviceDeps {
	return serviceDeps{run: service.Exec, executable: os.Executable}
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

func newServiceInstallCmd(deps serviceDeps) *cobra.Command {
	var system, noStart, printOnly, harden bool
	var userName string
	cmd := &cobra.Command{
		Use:   "install",
		Short: "Write latch.service, then enable and start it",
		Long: "install writes latch.service for this latch binary, reloads systemd and runs\n" +
			"`systemctl enable --now latch.service`. Without --system it is a user service\n" +
			"in ~/.config/systemd/user; with --system --user NAME a system service in\n" +
			"/etc/systemd/system that runs as NAME (needs root). --harden adds a sandbox;\n" +
			"read what it costs before you use it.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out, errOut := cmd.OutOrStdout(), cmd.ErrOrStderr()
			if userName != "" && !system {
				return errors.New("--user names the account a system service runs as and needs --system; a user service always runs as you")
			}
			exe, err := latchBinary(deps.executable)
			if errors.Is(err, errTempBinary) && printOnly {
				fmt.Fprintln(errOut, "latch: warning:", err)
			} else if err != nil {
				return err
			}
			home, err := serviceHome(system, userName)
			if err != nil {
				return err
			}
			unit, err := service.Unit(service.UnitOptions{
				ExecPath: exe, Home: home, System: system, User: userName, Harden: harden,
			})
			if err != nil {
				return err
			}
			if printOnly {
				_, err := io.WriteString(out, unit)
				return err
			}
			if !system && os.Geteuid() == 0 {
				fmt.Fprintln(errOut, "latch: warning: installing a user service for root; to run latch as another user, use --system --user NAME")
			}
			if userName == "root" || userName == "0" {
				fmt.Fprintln(errOut, "latch: warning: latch will run as root, and so will every command the chat sends")
			}
			m := &service.Manager{System: system, Run: deps.run, Stdout: out, Stderr: errOut, Trace: out}
			res, err := m.Install(cmd.Context(), unit, service.InstallOptions{NoStart: noStart})
			if err != nil {
				return installError(err, system)
			}
			printInstalled(out, res, system, harden)
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&system, "system", false, "install a system service (/etc/systemd/system; needs root and --user)")
	f.StringVar(&userName, "user", "", "the account a system service runs as")
	f.BoolVar(&noStart, "no-start", false, "write the unit and reload systemd, but do not enable or start it")
	f.BoolVar(&printOnly, "print", false, "print the unit and change nothing")
	f.BoolVar(&harden, "harden", false, "add systemd sandboxing (the agent can no longer use sudo; /usr and /etc become read-only)")
	return cmd
}

func printInstalled(w io.Writer, res *service.InstallResult, system, harden bool) {
	kind, systemctl, flag := "user", "systemctl --user", ""
	if system {
		kind, systemctl, flag = "system", "systemctl", " --system"
	}
	fmt.Fprintln(w)
	if res.Started {
		fmt.Fprintf(w, "latch runs as a %s service. `latch service status%s` shows it; `latch logs -f%s` follows its log.\n", kind, flag, flag)
	} else {
		fmt.Fprintf(w, "latch.service is installed but not started. Start it with: %s enable --now latch.service\n", systemctl)
	}
	if res.LingerHint != "" {
		fmt.Fprintf(w, "\nNote: %s.\n", res.LingerHint)
	}
	if harden {
		fmt.Fprintf(w, "\n%s\n", service.HardenTradeoff)
		if !system {
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

// latchBinary returns the absolute path of the running latch, with symlinks
// resolved, and refuses a binary that go run built in a temporary or cache
// directory: the service would start a file that is soon gone.
func latchBinary(executable func() (string, error)) (string, error) {
	p, err := executable()
	if err != nil {
		return "", fmt.Errorf("find the latch binary: %w", err)
	}
	if resolved, err := filepath.EvalSymlinks(p); err == nil {
		p = resolved
	}
	if p, err = filepath.Abs(p); err != nil {
		return "", fmt.Errorf("find the latch binary: %w", err)
	}
	if isTempBuild(p) {
		return p, fmt.Errorf("%w that will not last: %s\n"+
			"Build it where it can stay, then install from there:\n"+
			"  go build -o ~/.local/bin/latch ./cmd/latch && ~/.local/bin/latch service install", errTempBinary, p)
	}
	return p, nil
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

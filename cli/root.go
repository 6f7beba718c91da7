package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/latchd/latch/config"
	"github.com/latchd/latch/daemon"
)

// Exit codes scripts can branch on.
const (
	exitOK        = 0
	exitError     = 1
	exitNotRunner = 3  // status: the daemon did not answer (LSB "not running")
	exitConfig    = 78 // EX_CONFIG: fix the configuration; restarting will not help
)

// version is set at build time with -ldflags "-X github.com/latchd/latch/cli.version=...".
var version = "dev"

// exitError carries a specific exit code through cobra.
type codeError struct {
	code int
	err  error
}

func (e *codeError) Error() string { return e.err.Error() }
func (e *codeError) Unwrap() error { return e.err }

// Main runs the CLI with args and returns the process exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	root := newRoot()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(context.WithValue(context.Background(), argsKey{}, args))
	if err == nil {
		return exitOK
	}
	var ce *codeError
	if errors.As(err, &ce) {
		if ce.err != nil {
			fmt.Fprintln(stderr, "latch:", ce.err)
		}
		return ce.code
	}
	fmt.Fprintln(stderr, "latch:", err)
	if errors.Is(err, daemon.ErrConfig) || errors.Is(err, config.ErrInsecure) {
		return exitConfig
	}
	return exitError
}

// argsKey carries Main's arguments in the commands' context, for a
// command that replaces the process with another build (execLinked).
type argsKey struct{}

// mainArgs returns the arguments Main was called with.
func mainArgs(ctx context.Context) []string {
	args, _ := ctx.Value(argsKey{}).([]string)
	return args
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "latch",
		Short: "Text a local agent from your chats, latched to one chat by a one-shot code",
		Long: "latch is a daemon that lets its owner run commands on this machine from one\n" +
			"Telegram chat. The chat is latched by a pairing code minted on this machine.",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newInitCmd(), newRunCmd(), newPairCmd(), newUnpairCmd(), newStatusCmd(), newVersionCmd(), newServiceCmd(), newLogsCmd(), newChatCmd())
	root.AddCommand(newDoctorCmd(), newConfigCmd(), newJobsCmd())
	return root
}

// initHome resolves $LATCH_HOME and sets it up as `latch init` does,
// naming on w each path it creates, with note after it.
func initHome(w io.Writer, note string) (home string, created []string, err error) {
	if home, err = config.HomeDir(); err != nil {
		return "", nil, err
	}
	created, err = config.Init(home)
	for _, p := range created {
		fmt.Fprintln(w, "created", p+note)
	}
	return home, created, err
}

// homeConfig is $LATCH_HOME and what its config.toml says, for the
// commands that need only the home, its control socket or its store:
// unpair is the brake for a lost phone, and a typo in config.toml must not
// take it away, nor status, which says what the typo is.
type homeConfig struct {
	home string
	cfg  *config.Config // nil when config.toml does not load
	err  error          // why it does not
}

// loadHome resolves $LATCH_HOME and loads its configuration; only a home
// that cannot be found is an error.
func loadHome() (homeConfig, error) {
	home, err := config.HomeDir()
	if err != nil {
		return homeConfig{}, err
	}
	cfg, err := config.Load(home)
	return homeConfig{home: home, cfg: cfg, err: err}, nil
}

// configured reports whether config.toml configures the gateway; false
// when it does not load.
func (h homeConfig) configured(gateway string) bool {
	if h.cfg == nil {
		return false
	}
	p, ok := config.PlatformNamed(gateway)
	return ok && p.Settings(h.cfg).Enabled()
}

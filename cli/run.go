package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/latchd/latch/config"
	"github.com/latchd/latch/daemon"
)

func newRunCmd() *cobra.Command {
	var logFormat, logLevel string
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run the daemon in the foreground",
		Long: "run starts the configured gateways and the local control socket\n" +
			"($LATCH_HOME/latch.sock). SIGINT or SIGTERM stop it cleanly.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// A gateway this binary does not link runs in the build that
			// does (latch-matrix), in this process: before the hardening,
			// which takes the secrets it needs out of the environment.
			if err := execLinked(mainArgs(cmd.Context())); err != nil {
				return err
			}
			// Before anything else: non-dumpable, and latch's secrets out
			// of the environment the kernel shows in /proc.
			getenv, err := daemon.Harden()
			if err != nil {
				return err
			}
			// A first run sets up $LATCH_HOME itself; init never overwrites.
			home, _, err := initHome(cmd.ErrOrStderr(), " (a first run sets up $LATCH_HOME as `latch init` does)")
			if err != nil {
				return err
			}
			loader := config.Loader{Getenv: getenv}
			cfg, err := loader.Load(home)
			if err != nil {
				return fmt.Errorf("%w: %w", daemon.ErrConfig, err)
			}
			secrets := &daemon.Secrets{}
			secrets.Add(configSecrets(cfg)...)
			log, err := newLogger(cmd.ErrOrStderr(), logFormat, logLevel, secrets)
			if err != nil {
				return err
			}
			ctx, stop := context.WithCancel(cmd.Context())
			defer stop()
			stopNow := make(chan struct{})
			sigs := make(chan os.Signal, 1)
			signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
			defer signal.Stop(sigs)
			ended := make(chan struct{})
			defer close(ended)
			go watchStops(sigs, ended, stop, stopNow, cmd.ErrOrStderr())
			hup := make(chan os.Signal, 1)
			signal.Notify(hup, syscall.SIGHUP)
			defer signal.Stop(hup)
			reload := make(chan struct{})
			go func() {
				for {
					select {
					case <-ctx.Done():
						return
					case <-hup:
						select {
						case reload <- struct{}{}:
						case <-ctx.Done():
							return
						}
					}
				}
			}()
			load := func() (*config.Config, error) {
				c, err := loader.Load(home)
				if err == nil {
					// Before the new daemon logs anything with them.
					secrets.Add(configSecrets(c)...)
				}
				return c, err
			}
			build := func(c *config.Config) *daemon.Daemon {
				d := daemon.New(c, log, buildVersion())
				d.StopNow = stopNow
				d.GiveBackStartup = true
				return d
			}
			return daemon.Supervise(ctx, cfg, load, reload, log, build)
		},
	}
	cmd.Flags().StringVar(&logFormat, "log-format", "text", "log format: text or json")
	cmd.Flags().StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn or error")
	return cmd
}

// watchStops turns the first SIGINT or SIGTERM into a graceful stop
// (stop), and the second into an immediate one (stopNow closed): what runs
// is killed and reported as interrupted at the next start. It returns when
// ended closes.
func watchStops(sigs <-chan os.Signal, ended <-chan struct{}, stop func(), stopNow chan<- struct{}, w io.Writer) {
	for n := 0; ; n++ {
		select {
		case <-ended:
			return
		case <-sigs:
		}
		switch n {
		case 0:
			fmt.Fprintln(w, "latch: stopping; running commands and turns may finish first (press Ctrl-C again to stop them now)")
			stop()
		case 1:
			fmt.Fprintln(w, "latch: stopping now; what was running is reported as interrupted at the next start")
			close(stopNow)
		}
	}
}

// configSecrets are the secrets of c that the log must never show.
func configSecrets(c *config.Config) []string {
	out := append(config.PlatformSecrets(c), c.Agent.APIKey, c.Transcribe.APIKey)
	return append(out, c.MCP.MCPSecrets()...)
}

// newLogger builds the daemon's logger, writing to w, with the secrets
// scrubbed from every line (the set grows on reload).
func newLogger(w io.Writer, format, level string, secrets *daemon.Secrets) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	if os.Getenv("JOURNAL_STREAM") != "" {
		// journald stamps every line itself; a second timestamp is noise.
		opts.ReplaceAttr = func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		}
	}
	var h slog.Handler
	switch format {
	case "text":
		h = slog.NewTextHandler(w, opts)
	case "json":
		h = slog.NewJSONHandler(w, opts)
	default:
		return nil, fmt.Errorf("--log-format %q: want text or json", format)
	}
	return slog.New(daemon.RedactWith(h, secrets)), nil
}

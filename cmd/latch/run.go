package main

import (
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
			// A first run sets up $LATCH_HOME itself; init never overwrites.
			home, err := config.HomeDir()
			if err != nil {
				return err
			}
			if _, err := config.Init(home); err != nil {
				return err
			}
			cfg, err := config.Load(home)
			if err != nil {
				return fmt.Errorf("%w: %w", daemon.ErrConfig, err)
			}
			secrets := &daemon.Secrets{}
			secrets.Add(configSecrets(cfg)...)
			log, err := newLogger(cmd.ErrOrStderr(), logFormat, logLevel, secrets)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
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
				c, err := config.Load(home)
				if err == nil {
					// Before the new daemon logs anything with them.
					secrets.Add(configSecrets(c)...)
				}
				return c, err
			}
			build := func(c *config.Config) *daemon.Daemon {
				d := daemon.New(c, log, version)
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

// configSecrets are the secrets of c that the log must never show.
func configSecrets(c *config.Config) []string {
	return []string{c.Telegram.Token, c.Telegram.WebhookSecret, c.Agent.APIKey, c.Discord.Token}
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

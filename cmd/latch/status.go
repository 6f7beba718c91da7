package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/latchd/latch/config"
	"github.com/latchd/latch/control"
	"github.com/latchd/latch/daemon"
	"github.com/latchd/latch/store"
)

func newStatusCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show whether the daemon runs and the state of each gateway",
		Long: "status exits 0 when the daemon answered and 3 when it did not, so scripts\n" +
			"can wait on it. Without a daemon it shows what the database records.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig()
			if err != nil {
				return err
			}
			st, err := control.NewClient(config.SocketPath(cfg.Home)).Status(cmd.Context())
			running := err == nil
			if errors.Is(err, control.ErrNoDaemon) {
				st, err = offlineStatus(cfg)
			}
			if err != nil {
				return err
			}
			if asJSON {
				err = json.NewEncoder(cmd.OutOrStdout()).Encode(struct {
					Running bool `json:"running"`
					control.Status
				}{running, st})
			} else {
				printStatus(cmd.OutOrStdout(), running, st)
			}
			if err == nil && !running {
				return &codeError{code: exitNotRunner}
			}
			return err
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// offlineStatus reads the store of a home whose daemon is not running.
func offlineStatus(cfg *config.Config) (control.Status, error) {
	st := control.Status{Home: cfg.Home}
	gws := []struct {
		name       string
		configured bool
	}{{"telegram", cfg.Telegram.Enabled()}, {"discord", cfg.Discord.Enabled()}}
	db, err := store.Open(config.DBPath(cfg.Home), store.Options{ReadOnly: true})
	if errors.Is(err, store.ErrLocked) {
		// Held by a standalone `latch chat`, or by a daemon between its
		// socket closing and its exit: the latch cannot be read, and
		// "latched: no" would invite a needless pair.
		return st, errors.New("the database is in use by another latch process (a standalone `latch chat`, or a daemon that is stopping), so the state cannot be read; try again")
	}
	if err != nil {
		// No database yet (never run) is not an error for status.
		for _, g := range gws {
			if g.configured {
				st.Gateways = append(st.Gateways, control.GatewayStatus{Name: g.name, Configured: true})
			}
		}
		return st, nil
	}
	defer db.Close()
	err = db.View(func(tx *store.Tx) error {
		for _, g := range gws {
			gs, err := daemon.GatewayStatus(tx, g.name, time.Now())
			if err != nil {
				return err
			}
			if gs.Configured = g.configured; g.configured || gs.Latch != nil {
				st.Gateways = append(st.Gateways, gs)
			}
		}
		return nil
	})
	return st, err
}

func printStatus(w io.Writer, running bool, st control.Status) {
	if running {
		fmt.Fprintf(w, "latch %s is running (pid %d, up %s)\n", st.Version, st.PID, time.Since(st.StartedAt).Round(time.Second))
		if m := st.Memory; m != nil {
			fmt.Fprintf(w, "  memory:   %.1f MB live heap · %.1f MB held by the Go runtime · %d goroutines (%.2f MB of stacks)\n",
				float64(m.HeapLive)/1e6, float64(m.Held)/1e6, m.Goroutines, float64(m.Stacks)/1e6)
		}
		switch st.Commands {
		case "":
		case control.CommandsInCgroups:
			fmt.Fprintf(w, "  commands: %s\n", st.Commands)
		default:
			fmt.Fprintf(w, "  commands: ended by a walk of /proc (%s)\n", st.Commands)
		}
	} else {
		fmt.Fprintln(w, "latch is not running")
	}
	for _, g := range st.Gateways {
		fmt.Fprintf(w, "\n%s\n", g.Name)
		state := "not configured"
		switch {
		case g.Configured && !running:
			state = "configured"
		case g.Connected:
			state = "connected"
		case g.Configured:
			state = "not connected"
			if g.LastError != "" {
				state += ": " + g.LastError
			}
		}
		if g.BotName != "" {
			state += " as @" + g.BotName
		}
		fmt.Fprintf(w, "  gateway:  %s\n", state)
		if l := g.Latch; l != nil {
			fmt.Fprintf(w, "  latched:  %s %s (id %s) since %s\n", l.ChatType, l.ChatName, l.ChatID, l.Since.Local().Format(time.DateTime))
		} else {
			fmt.Fprintf(w, "  latched:  no — run `latch pair %s`\n", g.Name)
		}
		if p := g.Pending; p != nil {
			if p.Burned {
				fmt.Fprintf(w, "  code:     burned after %d wrong attempts; mint a new one\n", p.Attempts)
			} else {
				fmt.Fprintf(w, "  code:     pending, expires in %s (%d wrong attempts)\n", time.Until(p.ExpiresAt).Round(time.Second), p.Attempts)
			}
		}
		fmt.Fprintf(w, "  handled:  %d messages · %d running · %d from strangers dropped · %d failed pairing attempts\n",
			g.Handled, g.Running, g.StrangersDropped, g.FailedAttempts)
	}
}

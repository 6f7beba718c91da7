package cli

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
			hc, err := loadHome()
			if err != nil {
				return err
			}
			st, err := control.NewClient(config.SocketPath(hc.home)).Status(cmd.Context())
			running := err == nil
			if errors.Is(err, control.ErrNoDaemon) {
				st, err = offlineStatus(hc)
			}
			if err != nil {
				return err
			}
			var configError string
			if hc.err != nil {
				configError = hc.err.Error()
			}
			if asJSON {
				err = json.NewEncoder(cmd.OutOrStdout()).Encode(struct {
					Running     bool   `json:"running"`
					ConfigError string `json:"config_error,omitempty"`
					control.Status
				}{running, configError, st})
			} else {
				printStatus(cmd.OutOrStdout(), running, st, hc.err == nil)
				printConfigError(cmd.OutOrStdout(), running, hc.err)
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
func offlineStatus(hc homeConfig) (control.Status, error) {
	st := control.Status{Home: hc.home}
	type gw struct {
		name       string
		configured bool
	}
	var gws []gw
	for _, p := range config.Platforms {
		gws = append(gws, gw{p.Name, hc.configured(p.Name)})
	}
	db, err := store.Open(config.DBPath(hc.home), store.Options{ReadOnly: true})
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
			if gs.Configured = g.configured; g.configured || gs.Latch != nil || gs.Pending != nil {
				st.Gateways = append(st.Gateways, gs)
			}
		}
		return nil
	})
	return st, err
}

// printStatus prints st; configKnown is false when config.toml does not
// load, so that without a daemon nobody can tell which gateways are on.
func printStatus(w io.Writer, running bool, st control.Status, configKnown bool) {
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
		for _, l := range st.MCP {
			fmt.Fprintf(w, "  mcp:      %s\n", l)
		}
		if len(st.Escaped) > 0 {
			fmt.Fprintln(w, "  left running by commands outside latch's reach (/stop cannot end them):")
			for _, p := range st.Escaped {
				fmt.Fprintf(w, "    pid %d  %s\n", p.PID, p.Command)
			}
		}
	} else {
		fmt.Fprintln(w, "latch is not running")
	}
	for _, g := range st.Gateways {
		fmt.Fprintf(w, "\n%s\n", g.Name)
		state := "not configured"
		switch {
		case !running && !configKnown:
			state = "unknown: config.toml does not load"
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
				note := ""
				switch {
				case p.Replace:
					note = "; moves the latch once the chat paired now approves"
				case p.Approval:
					note = "; its latch waits for approval in a paired chat"
				}
				fmt.Fprintf(w, "  code:     pending, expires in %s (%d wrong attempts%s)\n", time.Until(p.ExpiresAt).Round(time.Second), p.Attempts, note)
			}
		}
		for _, q := range g.Waiting {
			fmt.Fprintf(w, "  waiting:  %s %s (id %s) redeemed a code; approve or deny in a paired chat before %s\n",
				q.ChatType, q.ChatName, q.ChatID, q.ExpiresAt.Local().Format("15:04:05"))
		}
		fmt.Fprintf(w, "  handled:  %d messages · %d running · %d from strangers dropped · %d failed pairing attempts\n",
			g.Handled, g.Running, g.StrangersDropped, g.FailedAttempts)
	}
}

// printConfigError says that config.toml does not load, and what that
// means for a daemon that runs (it keeps what it loaded) and one that
// does not (it cannot start).
func printConfigError(w io.Writer, running bool, err error) {
	if err == nil {
		return
	}
	fmt.Fprintf(w, "\nconfig.toml no longer loads: %v\n", err)
	if running {
		fmt.Fprintln(w, "The daemon keeps the config it loaded; a reload or restart would fail until this is fixed (`latch doctor` says how).")
	} else {
		fmt.Fprintln(w, "latch cannot start until this is fixed (`latch doctor` says how); `latch unpair` works meanwhile.")
	}
}

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/latchd/latch/config"
	"github.com/latchd/latch/control"
	"github.com/latchd/latch/daemon"
	"github.com/latchd/latch/pairing"
	"github.com/latchd/latch/store"
)

func newPairCmd() *cobra.Command {
	var ttl time.Duration
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "pair <gateway>",
		Short: "Mint a one-shot pairing code for a gateway (e.g. telegram)",
		Long: "pair mints a code through the running daemon's control socket, or directly in\n" +
			"the database when no daemon runs. Send `/pair CODE` to the bot from the chat\n" +
			"that should control latch. A new code supersedes the previous one.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			hc, err := loadHome()
			if err != nil {
				return err
			}
			res, err := mint(cmd, hc, args[0], ttl)
			if err != nil {
				return err
			}
			return printMint(cmd.OutOrStdout(), res, asJSON)
		},
	}
	cmd.Flags().DurationVar(&ttl, "ttl", pairing.DefaultTTL, "how long the code stays valid (max 1h)")
	cmd.Flags().BoolVar(&asJSON, "json", false, `print {"gateway","code","expires_at","link"}`)
	return cmd
}

func mint(cmd *cobra.Command, hc homeConfig, gateway string, ttl time.Duration) (control.MintResult, error) {
	client := control.NewClient(config.SocketPath(hc.home))
	res, err := client.Mint(cmd.Context(), control.MintRequest{Gateway: gateway, TTL: ttl})
	if !errors.Is(err, control.ErrNoDaemon) {
		return res, err
	}
	// No daemon: mint straight into the store. Opening it takes the file
	// lock, so this cannot race a daemon that is starting.
	if hc.err != nil {
		// A running daemon keeps the config it loaded; a new one would not start.
		return res, fmt.Errorf("no daemon runs, and none can start until config.toml loads: %w", hc.err)
	}
	if !hc.configured(gateway) {
		return res, fmt.Errorf("gateway %q is not configured (known: telegram, discord; set its token first)", gateway)
	}
	return withStore(hc.home, func(db *store.DB, p *pairing.Pairer) (control.MintResult, error) {
		var bot string
		db.View(func(tx *store.Tx) (err error) { bot, err = tx.BotName(gateway); return err })
		link := func(code string) string {
			if gateway != "telegram" || bot == "" {
				return ""
			}
			return "https://t.me/" + bot + "?start=" + code
		}
		return daemon.MintOffline(db, p, gateway, ttl, link)
	})
}

// withStore opens the store and the pairing key of a home with no daemon.
func withStore[T any](home string, fn func(*store.DB, *pairing.Pairer) (T, error)) (T, error) {
	var zero T
	if err := config.CheckHome(home); err != nil {
		return zero, err
	}
	secret, err := config.LoadSecret(home)
	if err != nil {
		return zero, err
	}
	p, err := pairing.New(secret)
	if err != nil {
		return zero, err
	}
	db, err := daemon.OpenStore(home)
	if err != nil {
		return zero, err
	}
	defer db.Close()
	return fn(db, p)
}

func printMint(w io.Writer, res control.MintResult, asJSON bool) error {
	if asJSON {
		return json.NewEncoder(w).Encode(res)
	}
	fmt.Fprintf(w, "Pairing code for %s:  %s\n", res.Gateway, res.Code)
	fmt.Fprintf(w, "Valid until %s (%s). One use; 5 wrong tries burn it.\n",
		res.ExpiresAt.Local().Format("15:04:05"), time.Until(res.ExpiresAt).Round(time.Second))
	fmt.Fprintf(w, "From the chat that should control latch, send:\n\n    /pair %s\n\n", res.Code)
	if res.Link == "" {
		return nil
	}
	fmt.Fprintf(w, "or open: %s\n", res.Link)
	if isTerminal(w) {
		if q, err := terminalQR(res.Link, os.Getenv); err == nil {
			fmt.Fprint(w, q)
		}
	}
	return nil
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

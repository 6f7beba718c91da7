package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
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
	var asJSON, replace bool
	cmd := &cobra.Command{
		Use:   "pair [gateway]",
		Short: "Mint a one-shot pairing code for a gateway (e.g. telegram)",
		Long: "pair mints a code through the running daemon's control socket, or directly in\n" +
			"the database when no daemon runs. Send `/pair CODE` to the bot from the chat\n" +
			"that should control latch. A new code supersedes the previous one. With one\n" +
			"gateway configured the argument may be left out.\n\n" +
			"While any gateway is paired, the latch a code makes waits for your approval\n" +
			"by button in a paired chat. A paired gateway gets no plain code: --replace\n" +
			"mints one that moves it to the chat that redeems it, once the chat paired now\n" +
			"approves (moving to a new phone). Lost the phone? `latch unpair` it first.",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			hc, err := loadHome()
			if err != nil {
				return err
			}
			gateway, err := pairTarget(hc, args)
			if err != nil {
				return err
			}
			res, err := mint(cmd, hc, control.MintRequest{Gateway: gateway, TTL: ttl, Replace: replace})
			if err != nil {
				return err
			}
			return printMint(cmd.OutOrStdout(), res, asJSON)
		},
	}
	cmd.Flags().DurationVar(&ttl, "ttl", pairing.DefaultTTL, fmt.Sprintf("how long the code stays valid (max %v)", pairing.MaxTTL))
	cmd.Flags().BoolVar(&replace, "replace", false, "move a paired gateway to the chat that redeems the code (the chat paired now approves)")
	cmd.Flags().BoolVar(&asJSON, "json", false, `print {"gateway","code","expires_at","link","approval","replace"}`)
	return cmd
}

// gatewayNames are the gateways latch knows, in the order it lists them.
func gatewayNames() []string {
	var out []string
	for _, p := range config.Platforms {
		out = append(out, p.Name)
	}
	return out
}

// pairTarget is the gateway `latch pair` mints for: the one named, or the
// only one configured; otherwise an error that lists the configured ones.
func pairTarget(hc homeConfig, args []string) (string, error) {
	if hc.cfg == nil {
		// config.toml does not load: a running daemon still knows its
		// gateways (it keeps the config it loaded), so a named one is
		// asked of it.
		if len(args) == 1 {
			return args[0], nil
		}
		return "", fmt.Errorf("config.toml does not load, so say which gateway to pair (`latch pair telegram`): %w", hc.err)
	}
	var have []string
	for _, name := range gatewayNames() {
		if hc.configured(name) {
			have = append(have, name)
		}
	}
	if len(args) == 1 {
		name := args[0]
		switch {
		case hc.configured(name):
			return name, nil
		case slices.Contains(gatewayNames(), name):
			return "", fmt.Errorf("%s is not configured: set [%s] token in config.toml (or %s), restart latch, and pair again", name, name, tokenVariable(name))
		case len(have) == 0:
			return "", fmt.Errorf("there is no gateway %q, and none is configured: latch has %s", name, strings.Join(gatewayNames(), " and "))
		}
		return "", fmt.Errorf("there is no gateway %q; configured: %s", name, strings.Join(have, ", "))
	}
	switch len(have) {
	case 0:
		first := config.Platforms[0]
		return "", fmt.Errorf("no gateway is configured: set [%s] token in config.toml (or %s), then run `latch pair %s`", first.Name, first.TokenEnv, first.Name)
	case 1:
		return have[0], nil
	}
	return "", fmt.Errorf("say which gateway to pair: `latch pair %s` (configured: %s)", have[0], strings.Join(have, ", "))
}

// tokenVariable is the variable that supplies gateway's token.
func tokenVariable(gateway string) string {
	if p, ok := config.PlatformNamed(gateway); ok {
		return p.TokenEnv
	}
	return "LATCH_" + strings.ToUpper(gateway) + "_TOKEN"
}

func mint(cmd *cobra.Command, hc homeConfig, req control.MintRequest) (control.MintResult, error) {
	client := control.NewClient(config.SocketPath(hc.home))
	res, err := client.Mint(cmd.Context(), req)
	if !errors.Is(err, control.ErrNoDaemon) {
		return res, err
	}
	// No daemon: mint straight into the store. Opening it takes the file
	// lock, so this cannot race a daemon that is starting. The approval
	// rule holds here too: pairing records with the code whether its latch
	// needs approval, and decides again when it is redeemed.
	gateway := req.Gateway
	if hc.err != nil {
		// A running daemon keeps the config it loaded; a new one would not start.
		return res, fmt.Errorf("no daemon runs, and none can start until config.toml loads: %w", hc.err)
	}
	if !hc.configured(gateway) {
		return res, fmt.Errorf("%s is not configured: set [%s] token in config.toml (or %s), then pair again", gateway, gateway, tokenVariable(gateway))
	}
	return withStore(hc.home, func(db *store.DB, p *pairing.Pairer) (control.MintResult, error) {
		var bot string
		db.View(func(tx *store.Tx) (err error) { bot, err = tx.BotName(gateway); return err })
		link := func(code string) string {
			if p, ok := daemon.PlatformNamed(gateway); ok && p.PairLink != nil {
				return p.PairLink(bot, code)
			}
			return ""
		}
		return daemon.MintOffline(db, p, req, link)
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
	switch {
	case res.Replace:
		fmt.Fprintf(w, "It moves %s to the chat that sends it, once you approve the move in the chat paired now.\n", res.Gateway)
	case res.Approval:
		fmt.Fprintln(w, "A gateway is paired, so the new latch waits for your approval by button in a paired chat.")
	}
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

package cli

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/latchd/latch/config"
	"github.com/latchd/latch/control"
	"github.com/latchd/latch/daemon"
	"github.com/latchd/latch/pairing"
	"github.com/latchd/latch/store"
)

func newUnpairCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "unpair <gateway>",
		Short: "Remove a gateway's latch, and with it any pending code; the old chat is told, best effort",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			// Not config.Load: the brake must work whatever config.toml holds.
			home, err := config.HomeDir()
			if err != nil {
				return err
			}
			gateway := args[0]
			err = control.NewClient(config.SocketPath(home)).Unpair(cmd.Context(), gateway)
			if errors.Is(err, control.ErrNoDaemon) {
				err = unpairOffline(home, gateway)
			}
			if errors.Is(err, control.ErrNotLatched) {
				fmt.Fprintf(cmd.OutOrStdout(), "%s was not paired.\n", gateway)
				return nil
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s unpaired. Mint a new code with `latch pair %s`: while another chat is paired its latch waits for that chat's approval; "+
				"with none paired, from %s (an unpair must not make the next latch free for whatever ran it).\n",
				gateway, gateway, time.Now().Add(pairing.GraceAfterUnpair).Format("15:04"))
			return nil
		},
	}
}

// unpairOffline removes the latch in the store directly; the notice to the
// old chat waits in the inbox for the next start.
func unpairOffline(home, gateway string) error {
	_, err := withStore(home, func(db *store.DB, p *pairing.Pairer) (struct{}, error) {
		old, err := daemon.UnpairOffline(db, p, gateway)
		if err == nil && old == nil {
			err = control.ErrNotLatched
		}
		return struct{}{}, err
	})
	return err
}

package main

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/latchd/latch/config"
)

func newInitCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "init",
		Short: "Create $LATCH_HOME with a commented config.toml and the pairing key",
		Long: "init creates $LATCH_HOME (default ~/.latch, mode 0700), a commented config.toml\n" +
			"(0600), the HMAC key file `secret` (0600) and the workspace. It never overwrites.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			home, err := config.HomeDir()
			if err != nil {
				return err
			}
			created, err := config.Init(home)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if len(created) == 0 {
				fmt.Fprintf(out, "%s is already set up; nothing changed.\n", home)
			}
			for _, p := range created {
				fmt.Fprintln(out, "created", p)
			}
			fmt.Fprintf(out, "\nNext: put your bot token in %s ([telegram] token) or LATCH_TELEGRAM_TOKEN,\n"+
				"then `latch run`, then `latch pair telegram`.\n", filepath.Join(home, config.ConfigFile))
			return nil
		},
	}
}

package cli

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
			"(0600), the HMAC key file `secret` (0600) and the workspace. It never overwrites;\n" +
			"the one thing it adds to an existing config.toml is a random [telegram]\n" +
			"webhook_secret when webhook_url is set without one.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			home, created, err := initHome(out, "")
			if err != nil {
				return err
			}
			cfgPath := filepath.Join(home, config.ConfigFile)
			added, err := config.EnsureWebhookSecret(home)
			if err != nil {
				return fmt.Errorf("webhook secret: %w", err)
			}
			if len(created) == 0 && !added {
				fmt.Fprintf(out, "%s is already set up; nothing changed.\n", home)
			}
			if added {
				fmt.Fprintf(out, "added a random [telegram] webhook_secret to %s (webhook_url is set)\n", cfgPath)
			}
			fmt.Fprintf(out, "\nNext: give latch your bot token (from @BotFather) with\n"+
				"    latch config set telegram.token -      (reads it from standard input)\n"+
				"or in %s, or in LATCH_TELEGRAM_TOKEN; then `latch run`, then `latch pair telegram`.\n"+
				"Without a token, `latch chat` runs !commands (and the agent, once a model is set) here.\n", cfgPath)
			return nil
		},
	}
}

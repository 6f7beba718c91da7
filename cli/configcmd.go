package cli

import (
	"bufio"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/latchd/latch/config"
)

func newConfigCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Change config.toml from the command line",
	}
	cmd.AddCommand(newConfigSetCmd(), newConfigKeysCmd())
	return cmd
}

func newConfigSetCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "set <key> <value>",
		Short: "Set a key of config.toml (e.g. telegram.token), keeping the rest of the file",
		Long: "set writes one setting into $LATCH_HOME/config.toml (creating the home as init\n" +
			"does if needed): it replaces the key's line, or adds it under its table, and\n" +
			"keeps every other byte. The file is replaced atomically, keeps its mode\n" +
			"(0600), and is left alone if the result would not load. A value of - is read\n" +
			"from the first line of standard input, which keeps a token out of the shell's\n" +
			"history. Lists (agent.fetch.allow) take their items separated by commas.\n" +
			"A running daemon takes the change on its next reload or restart.",
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			key, value := args[0], args[1]
			if value == "-" {
				line, err := bufio.NewReader(cmd.InOrStdin()).ReadString('\n')
				if line = strings.TrimRight(line, "\r\n"); err != nil && line == "" {
					return fmt.Errorf("read the value of %s from standard input: %w", key, err)
				}
				value = line
			}
			out := cmd.OutOrStdout()
			home, _, err := initHome(out, "")
			if err != nil {
				return err
			}
			res, err := config.Set(home, key, value)
			if errors.Is(err, config.ErrUnknownKey) {
				return &codeError{code: exitConfig, err: err}
			}
			if err != nil {
				return err
			}
			shown := fmt.Sprintf("%q", value)
			if config.Secret(key) {
				shown = "(not shown)"
			}
			fmt.Fprintf(out, "set %s = %s in %s\n", key, shown, res.Path)
			if res.AddedWebhookSecret {
				fmt.Fprintln(out, "added a random telegram.webhook_secret with it (Telegram sends it with every delivery)")
			}
			fmt.Fprintln(out, "A running latch takes it on its next reload (systemctl --user reload latch, or kill -HUP) or restart.")
			return nil
		},
	}
}

func newConfigKeysCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "keys",
		Short: "List the keys `latch config set` takes",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, k := range config.Settings() {
				fmt.Fprintln(cmd.OutOrStdout(), k)
			}
			return nil
		},
	}
}

package main

import (
	"github.com/spf13/cobra"

	"github.com/latchd/latch/service"
)

func newLogsCmd() *cobra.Command { return newLogsCmdWith(realServiceDeps()) }

func newLogsCmdWith(deps serviceDeps) *cobra.Command {
	var follow, system bool
	cmd := &cobra.Command{
		Use:   "logs",
		Short: "Show the log of the latch service (journalctl)",
		Long: "logs runs `journalctl [--user] -u latch.service`. It shows what the service\n" +
			"installed by `latch service install` logged; a latch started by hand logs to\n" +
			"its terminal instead.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			m := &service.Manager{System: system, Run: deps.run, Stdout: cmd.OutOrStdout(), Stderr: cmd.ErrOrStderr()}
			return exitStatus(m.Logs(cmd.Context(), follow))
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new lines")
	cmd.Flags().BoolVar(&system, "system", false, "the system service instead of the user service")
	return cmd
}

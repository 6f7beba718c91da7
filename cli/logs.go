package cli

import (
	"bytes"
	"errors"
	"io"

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
			"its terminal instead. It exits 1 when the journal holds nothing of the service.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := &noEntries{w: cmd.OutOrStdout()}
			errOut := &noEntries{w: cmd.ErrOrStderr()}
			m := &service.Manager{System: system, Run: deps.run, Stdout: out, Stderr: errOut}
			err := m.Logs(cmd.Context(), follow)
			if err == nil && (out.seen || errOut.seen) {
				return &codeError{code: exitError, err: errors.New("the journal holds no line of latch.service: it was never " +
					"installed or started (`latch service install`; `--system` for the system service), or this user " +
					"may not read that journal; a latch started with `latch run` logs to its terminal")}
			}
			return exitStatus(err)
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new lines")
	cmd.Flags().BoolVar(&system, "system", false, "the system service instead of the user service")
	return cmd
}

// noEntries passes journalctl's output on and notes whether it said it
// found nothing: journalctl exits 0 then, with "-- No entries --" or "No
// journal files were found."
type noEntries struct {
	w    io.Writer
	seen bool
}

func (n *noEntries) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte("-- No entries --")) || bytes.Contains(p, []byte("No journal files were found")) {
		n.seen = true
	}
	return n.w.Write(p)
}

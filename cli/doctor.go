package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/spf13/cobra"

	"github.com/latchd/latch/doctor"
	"github.com/latchd/latch/service"
)

// doctorDeps is what doctor takes from the machine besides the
// environment; tests replace it so they never run systemctl or find the
// real unit files.
type doctorDeps struct {
	run      service.Runner
	unitPath func(system bool) (string, error)
	http     *http.Client
}

func newDoctorCmd() *cobra.Command {
	return newDoctorCmdWith(doctorDeps{run: service.Exec, unitPath: service.UnitPath})
}

func newDoctorCmdWith(deps doctorDeps) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check the set-up and say how to fix what is wrong",
		Long: "doctor checks latch's home directory, config, key file and database, the\n" +
			"daemon, the workspace, the Telegram bot token, the model provider and the\n" +
			"systemd unit, one line each, with the fix for every problem. It exits 1 when\n" +
			"a check fails; warnings do not count. It never prints the token or the API key.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// With [matrix] configured, latch-matrix's doctor checks it; if
			// that binary is missing, this doctor's matrix check says so.
			_ = execLinked(mainArgs(cmd.Context()))
			d := &doctor.Doctor{Runner: deps.run, UnitPath: deps.unitPath, HTTPClient: deps.http}
			rep := d.Run(cmd.Context())
			out := cmd.OutOrStdout()
			if asJSON {
				if err := json.NewEncoder(out).Encode(rep); err != nil {
					return err
				}
			} else {
				printReport(out, rep)
			}
			if !rep.OK {
				return &codeError{code: exitError} // the report has said what is wrong
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, `print {"ok":…,"checks":[{"name","status","detail","fix"}]}`)
	return cmd
}

var statusMark = map[doctor.Status]string{doctor.OK: "✓", doctor.Fail: "✗", doctor.Warn: "!", doctor.Skip: "-"}

func printReport(w io.Writer, rep doctor.Report) {
	failed, warned := 0, 0
	for _, c := range rep.Checks {
		fmt.Fprintf(w, "%s %-10s %s\n", statusMark[c.Status], c.Name, c.Detail)
		if c.Fix != "" && (c.Status == doctor.Fail || c.Status == doctor.Warn) {
			fmt.Fprintf(w, "  %-10s fix: %s\n", "", c.Fix)
		}
		switch c.Status {
		case doctor.Fail:
			failed++
		case doctor.Warn:
			warned++
		}
	}
	switch {
	case failed > 0:
		fmt.Fprintf(w, "\n%s, %s.\n", plural(failed, "problem"), plural(warned, "warning"))
	case warned > 0:
		fmt.Fprintf(w, "\nNo problems, %s.\n", plural(warned, "warning"))
	default:
		fmt.Fprintln(w, "\nNo problems.")
	}
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

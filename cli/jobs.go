package cli

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/latchd/latch/config"
	"github.com/latchd/latch/control"
	"github.com/latchd/latch/daemon"
	"github.com/latchd/latch/pairing"
	"github.com/latchd/latch/schedule"
	"github.com/latchd/latch/store"
)

func newJobsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "jobs",
		Short: "Scheduled jobs: list, add and remove what runs on its own in a latched chat",
		Long: "Scheduled jobs run a prompt for the agent, or a !command, as a turn of their own and post\n" +
			"to the gateway's latched chat. The chat makes them with /every and /at; these commands\n" +
			"do it from the machine. Times are read in [schedule] timezone.",
	}
	cmd.AddCommand(newJobsListCmd(), newJobsAddCmd(), newJobsRmCmd())
	return cmd
}

func newJobsListCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the scheduled jobs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			hc, err := loadHome()
			if err != nil {
				return err
			}
			jobs, err := control.NewClient(config.SocketPath(hc.home)).JobsList(cmd.Context())
			if errors.Is(err, control.ErrNoDaemon) {
				if hc.cfg == nil { // the jobs' times are read in its time zone
					return hc.err
				}
				jobs, err = jobsOffline(hc.cfg)
			}
			if err != nil {
				return err
			}
			printJobs(cmd.OutOrStdout(), jobs)
			return nil
		},
	}
}

// jobsOffline reads the jobs from the store when no daemon runs.
func jobsOffline(cfg *config.Config) ([]control.JobInfo, error) {
	return withStore(cfg.Home, func(db *store.DB, _ *pairing.Pairer) ([]control.JobInfo, error) {
		s := schedule.New(schedule.Config{Store: db, Location: cfg.Schedule.Location})
		jobs, err := s.Jobs("")
		var out []control.JobInfo
		for _, j := range jobs {
			out = append(out, daemon.JobInfo(s, j))
		}
		return out, err
	})
}

func printJobs(w io.Writer, jobs []control.JobInfo) {
	if len(jobs) == 0 {
		fmt.Fprintln(w, "No scheduled jobs.")
		return
	}
	for _, j := range jobs {
		fmt.Fprintf(w, "%s %s  (by %s; %d runs, %d missed)\n", j.Gateway, j.Line, j.By, j.Runs, j.Missed)
	}
}

func newJobsAddCmd() *cobra.Command {
	var at string
	cmd := &cobra.Command{
		Use:   "add <gateway> [<schedule>] <prompt or !command>",
		Short: "Add a job for a gateway's latched chat (needs the running daemon)",
		Long: "Add a recurring job: latch jobs add telegram '0 8 * * *' 'summarise the news'\n" +
			"or a one-shot one: latch jobs add telegram --at 'tomorrow 09:00' '!backup'.\n" +
			"A schedule is an interval (30m, 2h), a 5-field cron line or @hourly, @daily, @weekly,\n" +
			"@monthly, @every 90m; --at takes 15:04, 2006-01-02 15:04, tomorrow 15:04 or in 30m.",
		Args: cobra.RangeArgs(2, 3),
		RunE: func(cmd *cobra.Command, args []string) error {
			home, err := config.HomeDir()
			if err != nil {
				return err
			}
			req := control.JobAddRequest{Gateway: args[0], At: at, Text: args[len(args)-1]}
			switch {
			case at == "" && len(args) == 3:
				req.Schedule = args[1]
			case at != "" && len(args) == 2:
			default:
				return errors.New("give either a schedule or --at, and the text in one argument (quote it)")
			}
			job, err := control.NewClient(config.SocketPath(home)).JobsAdd(cmd.Context(), req)
			if errors.Is(err, control.ErrNoDaemon) {
				return fmt.Errorf("%w: start it first (latch run, or latch service install)", err)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Added: %s %s\n", job.Gateway, job.Line)
			return nil
		},
	}
	cmd.Flags().StringVar(&at, "at", "", "run once at this time instead of on a schedule")
	return cmd
}

func newJobsRmCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "rm <id>",
		Short: "Remove a job; a run of it in progress is stopped (needs the running daemon)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			home, err := config.HomeDir()
			if err != nil {
				return err
			}
			id, err := strconv.ParseUint(strings.TrimPrefix(args[0], "#"), 10, 64)
			if err != nil {
				return fmt.Errorf("%q is not a job id (latch jobs list shows them)", args[0])
			}
			job, err := control.NewClient(config.SocketPath(home)).JobsRemove(cmd.Context(), id)
			if errors.Is(err, control.ErrNoDaemon) {
				return fmt.Errorf("%w: start it first (latch run, or latch service install)", err)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Removed: %s %s\n", job.Gateway, job.Line)
			return nil
		},
	}
}

package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintf(cmd.OutOrStdout(), "latch %s (%s, %s/%s)\n", buildVersion(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return nil
		},
	}
}

// buildVersion is the version set with -ldflags "-X github.com/latchd/latch/cli.version=…", else
// what the go command recorded in the binary: the module version (a
// `go install …@v1.2.3` build) and the VCS revision it was built from, with
// "+dirty" for uncommitted changes.
func buildVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if version != "dev" || !ok {
		return version
	}
	return versionOf(bi)
}

func versionOf(bi *debug.BuildInfo) string {
	// A pseudo-version (v0.0.0-<time>-<revision>[+dirty]) names the
	// revision already.
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	v := "dev"
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev == "" {
		return v
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if modified == "true" {
		rev += "+dirty"
	}
	return v + " " + rev
}

// Command latch-matrix is latch with the Matrix adapter linked in: the
// same commands, the same daemon. mautrix's package initialisers cost
// every process that links them idle memory whether or not Matrix is
// configured, so latch itself does not link the adapter; when [matrix] is
// configured, `latch run` and `latch doctor` replace themselves with this
// binary from beside them (cli.Main), keeping their process, arguments
// and environment, so a systemd unit that starts latch runs it unchanged.
package main

import (
	"context"
	"os"

	"github.com/latchd/latch/cli"
	"github.com/latchd/latch/config"
	"github.com/latchd/latch/daemon"
	"github.com/latchd/latch/doctor"
	"github.com/latchd/latch/internal/matrixlink"
)

func main() {
	daemon.LinkGateway("matrix", matrixlink.New)
	doctor.MatrixCheck = func(ctx context.Context, m config.MatrixConfig) (doctor.MatrixReport, error) {
		rep, err := matrixlink.Check(ctx, m)
		return doctor.MatrixReport(rep), err
	}
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}

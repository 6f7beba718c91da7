// Command latch is the latch daemon and its command-line client. It links
// every adapter but Matrix's: with a [matrix] section it runs latch-matrix
// from beside itself instead (see cli.Main), so a daemon without Matrix
// never pays for mautrix's package state.
package main

import (
	"os"

	"github.com/latchd/latch/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}

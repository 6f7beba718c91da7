//go:build !goolm

package dendritetest

import "context"

// E2EEAvailable reports whether this build can encrypt: not without the
// goolm build tag (see e2ee_goolm.go).
const E2EEAvailable = false

// EnableE2EE fails the test: encryption needs -tags goolm.
func (c *Client) EnableE2EE(context.Context) {
	c.t.Helper()
	c.t.Fatal("end-to-end encryption needs the goolm build tag: go test -tags goolm")
}

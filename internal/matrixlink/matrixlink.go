// Package matrixlink links the Matrix adapter into a latch build: the
// daemon's constructor and the doctor's check from latch's [matrix]
// section. Only cmd/latch-matrix and tests import it; cmd/latch must not
// (cli's TestLatchDoesNotLinkMautrix), see daemon.Platform.Binary.
package matrixlink

import (
	"context"
	"log/slog"

	"github.com/latchd/latch/config"
	"github.com/latchd/latch/gateways"
	"github.com/latchd/latch/gateways/matrix"
)

// New is the Matrix row's constructor (daemon.LinkGateway).
func New(cfg *config.Config, log *slog.Logger) gateways.Gateway {
	return matrix.New(adapterConfig(cfg.Matrix), log)
}

// Check is the doctor's Matrix check (doctor.MatrixCheck converts its
// report).
func Check(ctx context.Context, m config.MatrixConfig) (matrix.Report, error) {
	return matrix.Check(ctx, adapterConfig(m))
}

// adapterConfig is the adapter's Config for latch's [matrix] section.
func adapterConfig(m config.MatrixConfig) matrix.Config {
	return matrix.Config{Homeserver: m.Homeserver, UserID: m.UserID, AccessToken: m.Token,
		DeviceID: m.DeviceID, AllowGroups: m.AllowGroups, Verbosity: m.Verbosity}
}

package doctor

import (
	"context"
	"errors"
	"fmt"

	"github.com/latchd/latch/config"
	"github.com/latchd/latch/gateways"
)

// MatrixReport is what a Matrix check found: the fields of the adapter's
// matrix.Report, which latch-matrix converts.
type MatrixReport struct {
	User, Device               string
	KeysUploaded               bool
	CrossSigning, DeviceSigned bool
}

// MatrixCheck is the Matrix adapter's check (matrix.Check), set by the
// build that links it (cmd/latch-matrix); nil in latch, which runs
// latch-matrix's doctor instead when [matrix] is configured (cli).
var MatrixCheck func(ctx context.Context, m config.MatrixConfig) (MatrixReport, error)

// checkMatrix tests the access token as the gateway uses it (whoami),
// then whether the device's encryption keys are on the homeserver (latch
// uploads them at its first start) and the account's cross-signing.
func (r *run) checkMatrix(ctx context.Context) Check {
	if r.cfg == nil {
		return skip("needs a config that loads")
	}
	m := r.cfg.Matrix
	if !m.Enabled() {
		return skip(fmt.Sprintf("no access token ([matrix] access_token or %s); the Matrix gateway is off", config.EnvMatrixToken))
	}
	if MatrixCheck == nil {
		return fail("this latch binary does not link the Matrix adapter, and latch-matrix did not run in its place",
			"build latch-matrix beside latch, in latch's source tree: CGO_ENABLED=0 go build -trimpath -ldflags=\"-s -w\" -o DIR ./cmd/latch-matrix (DIR: the folder latch is in)")
	}
	rep, err := MatrixCheck(ctx, m)
	switch {
	case errors.Is(err, gateways.ErrUnauthorized):
		return fail(err.Error(), "log the bot in again (e.g. POST /_matrix/client/v3/login with its password) and put the new access token "+
			"in [matrix] access_token_file and its device_id in [matrix] device_id (the token came from "+m.TokenSource+")")
	case err != nil && rep.User != "":
		return fail(err.Error(), "set [matrix] user_id to the token's user, or use the bot's own token")
	case err != nil:
		return fail(err.Error(), "check the network, or [matrix] homeserver ("+m.Homeserver+")")
	case !rep.KeysUploaded:
		return warn(fmt.Sprintf("%s, device %s: no encryption keys on the homeserver yet, so encrypted rooms cannot reach latch", rep.User, rep.Device),
			"start latch (latch run or the service): it uploads the device's keys at its first start")
	case !rep.CrossSigning:
		return warn(fmt.Sprintf("%s, device %s: keys uploaded; the account has no cross-signing, so Element shows latch's messages as from an unverified device", rep.User, rep.Device),
			"optional: log in as the bot in Element once and set up cross-signing (Settings → Security), then verify latch's device "+rep.Device)
	case !rep.DeviceSigned:
		return warn(fmt.Sprintf("%s, device %s: keys uploaded; the device is not signed by the account's cross-signing key", rep.User, rep.Device),
			"optional: in Element, logged in as the bot, verify the session "+rep.Device)
	}
	return ok(fmt.Sprintf("%s, device %s: keys uploaded, cross-signed", rep.User, rep.Device))
}

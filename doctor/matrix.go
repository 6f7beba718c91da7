package doctor

import (
	"context"
	"errors"
	"fmt"

	"github.com/latchd/latch/config"
	"github.com/latchd/latch/gateways"
	"github.com/latchd/latch/gateways/matrix"
)

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
	rep, err := matrix.Check(ctx, matrix.Config{Homeserver: m.Homeserver, UserID: m.UserID, AccessToken: m.Token, DeviceID: m.DeviceID})
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

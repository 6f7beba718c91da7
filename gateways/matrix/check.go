package matrix

import (
	"context"
	"errors"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"

	"github.com/latchd/latch/gateways/adapter"
)

// Report is what Check found.
type Report struct {
	User   string // the token's user
	Device string // and device
	// KeysUploaded: the device has identity keys on the homeserver.
	KeysUploaded bool
	// CrossSigning: the user has a master key; DeviceSigned: the device is
	// signed by the user's self-signing key (verified in Element's eyes).
	CrossSigning, DeviceSigned bool
}

// Check verifies the token with whoami, as latch doctor does, and reads
// the device's keys and the user's cross-signing state from /keys/query.
// Its error is scrubbed of the token, and ErrUnauthorized for a token the
// homeserver refuses.
func Check(ctx context.Context, cfg Config) (Report, error) {
	g := New(cfg, nil)
	if cfg.Homeserver == "" {
		return Report{}, errors.New(errNoHomeserver)
	}
	if g.cli == nil {
		return Report{}, errors.New(g.lastErr)
	}
	var who *mautrix.RespWhoami
	err := g.call(ctx, func(ctx context.Context) (err error) {
		who, err = g.cli.Whoami(ctx)
		return err
	})
	if err != nil {
		if unauthorized(err) {
			return Report{}, errors.Join(adapter.ErrUnauthorized, errors.New("matrix: the homeserver refused the access token: "+err.Error()))
		}
		return Report{}, errors.New("matrix: whoami: " + err.Error())
	}
	dev := who.DeviceID
	if dev == "" {
		dev = id.DeviceID(cfg.DeviceID)
	}
	rep := Report{User: string(who.UserID), Device: string(dev)}
	if cfg.UserID != "" && who.UserID != id.UserID(cfg.UserID) {
		return rep, errors.New("matrix: the access token is " + string(who.UserID) + "'s, not " + cfg.UserID + "'s")
	}
	var keys *mautrix.RespQueryKeys
	err = g.call(ctx, func(ctx context.Context) (err error) {
		keys, err = g.cli.QueryKeys(ctx, &mautrix.ReqQueryKeys{DeviceKeys: mautrix.DeviceKeysRequest{who.UserID: {}}})
		return err
	})
	if err != nil {
		return rep, errors.New("matrix: reading the device keys: " + err.Error())
	}
	dk, ok := keys.DeviceKeys[who.UserID][dev]
	rep.KeysUploaded = ok && dk.Keys.GetEd25519(dev) != ""
	_, rep.CrossSigning = keys.MasterKeys[who.UserID]
	if ss, ok := keys.SelfSigningKeys[who.UserID]; ok && rep.KeysUploaded {
		for kid := range ss.Keys {
			if _, signed := dk.Signatures[who.UserID][id.KeyID(kid)]; signed {
				rep.DeviceSigned = true
			}
		}
	}
	return rep, nil
}

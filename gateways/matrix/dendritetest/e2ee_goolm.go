//go:build goolm

package dendritetest

import (
	"context"
	"errors"
	"fmt"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/crypto"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// The owner's side of end-to-end encryption is mautrix's own OlmMachine
// (what mautrix's bots and bridges use), on goolm: an implementation
// independent of latch's, so a mistake latch makes on both ends cannot
// cancel out. mautrix/crypto picks goolm only under the goolm build tag
// (without it, cgo libolm), so this file, and the encrypted end-to-end
// tests, build only with -tags goolm; .ci/run runs them so.

// E2EEAvailable reports whether this build can encrypt (the goolm tag).
const E2EEAvailable = true

type machine struct {
	mach  *crypto.OlmMachine
	state mautrix.StateStore
}

// EnableE2EE gives c a fresh Olm account and uploads its device keys; call
// it before Run.
func (c *Client) EnableE2EE(ctx context.Context) {
	c.t.Helper()
	log := zerolog.Nop()
	mach := crypto.NewOlmMachine(c.Client, &log, crypto.NewMemoryStore(nil), c.StateStore.(crypto.StateStore))
	if err := mach.Load(ctx); err != nil {
		c.t.Fatalf("%s: load the Olm machine: %v", c.UserID, err)
	}
	if err := mach.ShareKeys(ctx, -1); err != nil {
		c.t.Fatalf("%s: upload device keys: %v", c.UserID, err)
	}
	c.e2ee = machine{mach, c.StateStore}
}

func (m machine) processSync(ctx context.Context, resp *mautrix.RespSync, since string) {
	m.mach.ProcessSyncResponse(ctx, resp, since)
}

func (m machine) decrypt(ctx context.Context, evt *event.Event) (*event.Event, error) {
	if err := evt.Content.ParseRaw(evt.Type); err != nil && !errors.Is(err, event.ErrContentAlreadyParsed) {
		return nil, err
	}
	dec, err := m.mach.DecryptMegolmEvent(ctx, evt)
	if err != nil {
		return nil, err
	}
	_ = dec.Content.ParseRaw(dec.Type)
	return dec, nil
}

func (m machine) encrypt(ctx context.Context, room id.RoomID, typ event.Type, content any) (any, error) {
	enc, err := m.mach.EncryptMegolmEvent(ctx, room, typ, content)
	if errors.Is(err, crypto.ErrNoGroupSession) || errors.Is(err, crypto.ErrSessionExpired) || errors.Is(err, crypto.ErrSessionNotShared) {
		members, merr := m.state.GetRoomJoinedOrInvitedMembers(ctx, room)
		if merr != nil {
			return nil, fmt.Errorf("members of %s: %w", room, merr)
		}
		if err := m.mach.ShareGroupSession(ctx, room, members); err != nil {
			return nil, fmt.Errorf("share the Megolm session: %w", err)
		}
		enc, err = m.mach.EncryptMegolmEvent(ctx, room, typ, content)
	}
	return enc, err
}

// CrossSign gives c's account cross-signing keys (uploaded with password
// for the server's interactive auth, as Element's "set up secure backup"
// does) and signs the account's device dev with them: dev is then
// verified in Element's eyes. Call it after EnableE2EE.
func (c *Client) CrossSign(ctx context.Context, password string, dev id.DeviceID) {
	c.t.Helper()
	m, ok := c.e2ee.(machine)
	if !ok {
		c.t.Fatalf("%s: CrossSign needs EnableE2EE first", c.UserID)
	}
	keys, err := m.mach.GenerateCrossSigningKeys()
	if err != nil {
		c.t.Fatalf("%s: generate cross-signing keys: %v", c.UserID, err)
	}
	auth := func(ui *mautrix.RespUserInteractive) any {
		return &mautrix.ReqUIAuthLogin{BaseAuthData: mautrix.BaseAuthData{Type: mautrix.AuthTypePassword, Session: ui.Session},
			User: c.UserID.String(), Password: password}
	}
	if err := m.mach.PublishCrossSigningKeys(ctx, keys, auth); err != nil {
		c.t.Fatalf("%s: upload cross-signing keys: %v", c.UserID, err)
	}
	device, err := m.mach.GetOrFetchDevice(ctx, c.UserID, dev)
	if err != nil {
		c.t.Fatalf("%s: fetch device %s: %v", c.UserID, dev, err)
	}
	if err := m.mach.SignOwnDevice(ctx, device); err != nil {
		c.t.Fatalf("%s: sign device %s: %v", c.UserID, dev, err)
	}
}

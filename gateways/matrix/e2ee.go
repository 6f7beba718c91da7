package matrix

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/crypto/canonicaljson"
	"maunium.net/go/mautrix/crypto/goolm/account"
	"maunium.net/go/mautrix/crypto/goolm/session"
	"maunium.net/go/mautrix/crypto/olm"
	"maunium.net/go/mautrix/crypto/signatures"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/latchd/latch/gateways/adapter"
)

// End-to-end encryption: Olm between devices (to share room keys) and
// Megolm in rooms, from goolm's primitives. latch imports goolm's
// packages and never mautrix/crypto: that package picks libolm (cgo) or
// goolm by the goolm build tag, and latch must build and test the same
// way with and without cgo, with no tag.
//
// All of it lives in the Vault (latch.db, 0600) under these keys, each
// written before what it enables is used: the account before its keys
// are uploaded, an Olm session before the message it decrypted is taken,
// a Megolm session before an event it encrypts is sent.
const (
	vaultAccount   = "account"   // the Olm account (identity and one-time keys)
	vaultPublished = "published" // "1" once the device keys are on the homeserver
	vaultOlm       = "olm/"      // + sender curve25519 + "/" + session ID
	vaultIn        = "in/"       // + room + "/" + session ID: an inbound Megolm session
	vaultOut       = "out/"      // + room: the outbound Megolm session
)

// pickleKey encrypts goolm's pickles. It is not a secret of its own: the
// Vault's protection is latch.db's (0600, the owner's home).
var pickleKey = []byte("latch matrix e2ee pickle")

// Bounds on what others can make latch keep: sessions from anyone but
// the owner stop at these.
const (
	maxOlmPerKey  = 8
	maxOlmKeys    = 256
	maxInbound    = 1024
	maxIndexSeen  = 4096
	otkTarget     = 50
	rotateAfter   = 100 // messages per outbound session
	rotateEvery   = 7 * 24 * time.Hour
	olmAlgorithm  = id.AlgorithmOlmV1
	megolmAlgoStr = string(id.AlgorithmMegolmV1)
)

// e2ee is the gateway's encryption state.
type e2ee struct {
	g     *Gateway
	v     adapter.Vault
	ed    id.Ed25519
	curve id.Curve25519

	send sync.Mutex // one encrypt at a time (key sharing is not reentrant)

	mu      sync.Mutex
	acc     *account.Account
	olm     map[id.Curve25519][]olm.Session
	in      map[string]*inbound // vaultIn key
	out     map[id.RoomID]*outbound
	devices map[id.UserID]map[id.DeviceID]device
	seenIdx map[string]id.EventID // session/index → event
	members map[id.RoomID]members
	lastOTK time.Time
}

// inbound is a Megolm session someone shared with latch, bound to the
// room and to the user whose device sent it over Olm: an event it
// decrypts counts only from that user, in that room.
type inbound struct {
	s      *session.MegolmInboundSession
	Pickle []byte    `json:"p"`
	Room   id.RoomID `json:"r"`
	User   id.UserID `json:"u"`
	Sender string    `json:"k"` // the sender device's curve25519
}

// outbound is latch's Megolm session in a room and whom it was shared
// with.
type outbound struct {
	s       *session.MegolmOutboundSession
	Pickle  []byte          `json:"p"`
	Created time.Time       `json:"c"`
	Count   int             `json:"n"`
	Shared  map[string]bool `json:"s"` // user|device
}

// device is one device of a user, its keys checked against its own
// signature.
type device struct {
	id    id.DeviceID
	ed    id.Ed25519
	curve id.Curve25519
}

// openE2EE loads the account from the Vault, or makes one and stores it,
// then uploads the device keys if they are not yet published.
func openE2EE(ctx context.Context, g *Gateway, v adapter.Vault) (*e2ee, error) {
	stored, err := v.Load(ctx, g.Name())
	if err != nil {
		return nil, fmt.Errorf("reading the keys: %w", err)
	}
	e := &e2ee{g: g, v: v, olm: map[id.Curve25519][]olm.Session{}, in: map[string]*inbound{}, out: map[id.RoomID]*outbound{},
		devices: map[id.UserID]map[id.DeviceID]device{}, seenIdx: map[string]id.EventID{}, members: map[id.RoomID]members{}}
	if p := stored[vaultAccount]; p != nil {
		if e.acc, err = account.AccountFromPickled(p, pickleKey); err != nil {
			return nil, fmt.Errorf("the stored account does not load: %w", err)
		}
	} else {
		if e.acc, err = account.NewAccount(); err != nil {
			return nil, err
		}
		if err := e.acc.GenOneTimeKeys(otkTarget); err != nil {
			return nil, err
		}
		if err := e.acc.GenFallbackKey(); err != nil {
			return nil, err
		}
		// Durably before use: keys uploaded and then lost would leave a
		// device nobody can encrypt to, and need a new login.
		if err := e.saveAccount(ctx, nil); err != nil {
			return nil, err
		}
	}
	if e.ed, e.curve, err = e.acc.IdentityKeys(); err != nil {
		return nil, err
	}
	e.load(stored)
	if string(stored[vaultPublished]) != "1" {
		if err := e.uploadKeys(ctx, true); err != nil {
			return nil, fmt.Errorf("uploading the device keys: %w", err)
		}
	}
	return e, nil
}

// load reads the sessions the Vault holds; one that does not load is
// dropped with a warning (its messages then cannot be decrypted).
func (e *e2ee) load(stored map[string][]byte) {
	for k, val := range stored {
		switch {
		case strings.HasPrefix(k, vaultOlm):
			key, _, _ := strings.Cut(strings.TrimPrefix(k, vaultOlm), "/")
			s, err := session.OlmSessionFromPickled(val, pickleKey)
			if err != nil {
				e.g.log.Warn("a stored Olm session does not load", "err", err)
				continue
			}
			e.olm[id.Curve25519(key)] = append(e.olm[id.Curve25519(key)], s)
		case strings.HasPrefix(k, vaultIn):
			var in inbound
			if json.Unmarshal(val, &in) != nil {
				continue
			}
			s, err := session.MegolmInboundSessionFromPickled(in.Pickle, pickleKey)
			if err != nil {
				e.g.log.Warn("a stored Megolm session does not load", "err", err)
				continue
			}
			in.s = s
			e.in[k] = &in
		case strings.HasPrefix(k, vaultOut):
			var out outbound
			if json.Unmarshal(val, &out) != nil {
				continue
			}
			s, err := session.MegolmOutboundSessionFromPickled(out.Pickle, pickleKey)
			if err != nil {
				continue
			}
			out.s = s
			e.out[id.RoomID(strings.TrimPrefix(k, vaultOut))] = &out
		}
	}
}

// saveAccount stores the account (and put) in one transaction.
func (e *e2ee) saveAccount(ctx context.Context, put map[string][]byte) error {
	p, err := e.acc.Pickle(pickleKey)
	if err != nil {
		return err
	}
	if put == nil {
		put = map[string][]byte{}
	}
	put[vaultAccount] = p
	return e.v.Save(ctx, e.g.Name(), put, nil)
}

// signJSON signs obj (without signatures and unsigned) with the account.
func (e *e2ee) signJSON(obj any) (string, error) {
	b, err := json.Marshal(obj)
	if err != nil {
		return "", err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return "", err
	}
	delete(m, "signatures")
	delete(m, "unsigned")
	if b, err = canonicaljson.Marshal(m); err != nil {
		return "", err
	}
	sig, err := e.acc.Sign(b)
	return string(sig), err
}

// uploadKeys publishes the one-time keys not yet published, and with
// device the device keys. The account marks them published (and is
// stored) only after the homeserver took them.
func (e *e2ee) uploadKeys(ctx context.Context, withDevice bool) error {
	user, dev := e.g.cli.UserID, e.g.cli.DeviceID
	req := &mautrix.ReqUploadKeys{OneTimeKeys: map[id.KeyID]mautrix.OneTimeKey{}}
	if withDevice {
		dk := &mautrix.DeviceKeys{UserID: user, DeviceID: dev, Algorithms: []id.Algorithm{id.AlgorithmMegolmV1, id.AlgorithmOlmV1},
			Keys: mautrix.KeyMap{id.NewDeviceKeyID(id.KeyAlgorithmCurve25519, dev): string(e.curve),
				id.NewDeviceKeyID(id.KeyAlgorithmEd25519, dev): string(e.ed)}}
		sig, err := e.signJSON(dk)
		if err != nil {
			return err
		}
		dk.Signatures = signatures.NewSingleSignature(user, id.KeyAlgorithmEd25519, dev.String(), sig)
		req.DeviceKeys = dk
	}
	otks, err := e.acc.OneTimeKeys()
	if err != nil {
		return err
	}
	sign := func(k id.Curve25519, fallback bool) (mautrix.OneTimeKey, error) {
		otk := mautrix.OneTimeKey{Key: k, Fallback: fallback, IsSigned: true}
		sig, err := e.signJSON(&otk)
		otk.Signatures = signatures.NewSingleSignature(user, id.KeyAlgorithmEd25519, dev.String(), sig)
		return otk, err
	}
	for kid, k := range otks {
		if req.OneTimeKeys[id.NewKeyID(id.KeyAlgorithmSignedCurve25519, kid)], err = sign(k, false); err != nil {
			return err
		}
	}
	body := map[string]any{"one_time_keys": req.OneTimeKeys}
	if req.DeviceKeys != nil {
		body["device_keys"] = req.DeviceKeys
	}
	fallback := map[string]mautrix.OneTimeKey{}
	for kid, k := range e.acc.FallbackKeyUnpublished() {
		if fallback[string(id.NewKeyID(id.KeyAlgorithmSignedCurve25519, kid))], err = sign(k, true); err != nil {
			return err
		}
	}
	if len(fallback) > 0 {
		body["fallback_keys"] = fallback
	}
	err = e.g.call(ctx, func(ctx context.Context) error {
		_, err := e.g.cli.MakeRequest(ctx, "POST", e.g.cli.BuildClientURL("v3", "keys", "upload"), body, nil)
		return err
	})
	if err != nil {
		return err
	}
	e.acc.MarkKeysAsPublished()
	put := map[string][]byte{}
	if withDevice {
		put[vaultPublished] = []byte("1")
	}
	return e.saveAccount(ctx, put)
}

// afterSync tops the one-time keys up when the homeserver says few are
// left, and forgets the devices of users whose device lists changed (a
// new device of theirs gets the room keys with the next message).
func (e *e2ee) afterSync(ctx context.Context, resp *mautrix.RespSync) {
	e.mu.Lock()
	changed := false
	for _, u := range append(resp.DeviceLists.Changed, resp.DeviceLists.Left...) {
		if _, ok := e.devices[u]; ok {
			delete(e.devices, u)
			changed = true
		}
	}
	if changed || len(resp.DeviceLists.Left) > 0 {
		for _, o := range e.out {
			o.Count = rotateAfter // rotate: a device gone must not read on
		}
	}
	low := resp.DeviceOTKCount.SignedCurve25519 < otkTarget/2 && time.Since(e.lastOTK) > time.Minute
	if low {
		e.lastOTK = time.Now()
		if err := e.acc.GenOneTimeKeys(uint(otkTarget - resp.DeviceOTKCount.SignedCurve25519)); err != nil {
			low = false
		}
	}
	var err error
	if low {
		err = e.uploadKeys(ctx, false)
	}
	e.mu.Unlock()
	if err != nil && ctx.Err() == nil {
		e.g.log.Warn("uploading one-time keys failed", "err", err)
	}
}

// toDevice reads the Olm-encrypted to-device events: room keys shared
// with latch, stored before the events they decrypt are read.
func (e *e2ee) toDevice(ctx context.Context, evts []*event.Event) {
	for _, evt := range evts {
		if evt == nil || evt.Type.Type != event.ToDeviceEncrypted.Type {
			continue
		}
		if err := e.roomKey(ctx, evt); err != nil {
			e.g.log.Warn("an encrypted to-device event could not be read", "user", string(evt.Sender), "err", err)
		}
	}
}

// olmContent is an Olm-encrypted event's content.
type olmContent struct {
	Algorithm  string        `json:"algorithm"`
	SenderKey  id.Curve25519 `json:"sender_key"`
	Ciphertext map[id.Curve25519]struct {
		Type id.OlmMsgType `json:"type"`
		Body string        `json:"body"`
	} `json:"ciphertext"`
}

// olmPayload is what an Olm message decrypts to.
type olmPayload struct {
	Type          string          `json:"type"`
	Content       json.RawMessage `json:"content"`
	Sender        id.UserID       `json:"sender"`
	Recipient     id.UserID       `json:"recipient"`
	RecipientKeys struct {
		Ed25519 id.Ed25519 `json:"ed25519"`
	} `json:"recipient_keys"`
	Keys struct {
		Ed25519 id.Ed25519 `json:"ed25519"`
	} `json:"keys"`
}

func (e *e2ee) roomKey(ctx context.Context, evt *event.Event) error {
	var c olmContent
	if err := json.Unmarshal(evt.Content.VeryRaw, &c); err != nil || c.Algorithm != string(olmAlgorithm) || c.SenderKey == "" {
		return errors.New("not an Olm message")
	}
	ct, ok := c.Ciphertext[e.curve]
	if !ok {
		return errors.New("not encrypted for this device")
	}
	plain, err := e.olmDecrypt(ctx, evt.Sender, c.SenderKey, ct.Type, ct.Body)
	if err != nil {
		return err
	}
	var p olmPayload
	if err := json.Unmarshal(plain, &p); err != nil {
		return errors.New("the Olm payload is not JSON")
	}
	if p.Sender != evt.Sender || p.Recipient != e.g.cli.UserID || p.RecipientKeys.Ed25519 != e.ed {
		return errors.New("the Olm payload is for someone else or from someone else than its sender")
	}
	if p.Type != event.ToDeviceRoomKey.Type {
		return nil
	}
	var rk struct {
		Algorithm  string       `json:"algorithm"`
		RoomID     id.RoomID    `json:"room_id"`
		SessionID  id.SessionID `json:"session_id"`
		SessionKey string       `json:"session_key"`
	}
	if json.Unmarshal(p.Content, &rk) != nil || rk.Algorithm != megolmAlgoStr || rk.RoomID == "" || rk.SessionKey == "" {
		return errors.New("a room key that cannot be read")
	}
	s, err := session.NewMegolmInboundSession([]byte(rk.SessionKey))
	if err != nil {
		return fmt.Errorf("the room key: %w", err)
	}
	if s.ID() != rk.SessionID {
		return errors.New("the room key's session ID does not match it")
	}
	key := vaultIn + string(rk.RoomID) + "/" + string(rk.SessionID)
	e.mu.Lock()
	defer e.mu.Unlock()
	if old := e.in[key]; old != nil && (old.User != evt.Sender || old.Sender != string(c.SenderKey)) {
		return errors.New("a room key claiming a session someone else shared")
	}
	if _, ok := e.in[key]; !ok && len(e.in) >= maxInbound && evt.Sender != e.g.ownerNow().User {
		return errors.New("too many room keys kept; a stranger's is not")
	}
	pk, err := s.Pickle(pickleKey)
	if err != nil {
		return err
	}
	in := &inbound{s: s, Pickle: pk, Room: rk.RoomID, User: evt.Sender, Sender: string(c.SenderKey)}
	b, _ := json.Marshal(in)
	if err := e.v.Save(ctx, e.g.Name(), map[string][]byte{key: b}, nil); err != nil {
		return err
	}
	e.in[key] = in
	return nil
}

// olmDecrypt decrypts an Olm message from the device with curve key
// sender: with a session latch has, or for a pre-key message a new one
// (the one-time key it used is then removed, account and session stored
// together before the plaintext is used).
func (e *e2ee) olmDecrypt(ctx context.Context, user id.UserID, sender id.Curve25519, typ id.OlmMsgType, body string) ([]byte, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, s := range e.olm[sender] {
		if typ == id.OlmMsgTypePreKey {
			if ok, err := s.MatchesInboundSessionFrom(string(sender), body); err != nil || !ok {
				continue
			}
		}
		plain, err := s.Decrypt(body, typ)
		if err != nil {
			continue
		}
		return plain, e.saveOlm(ctx, sender, s, false)
	}
	if typ != id.OlmMsgTypePreKey {
		return nil, errors.New("no Olm session decrypts it")
	}
	if _, ok := e.olm[sender]; !ok && len(e.olm) >= maxOlmKeys && user != e.g.ownerNow().User {
		return nil, errors.New("too many Olm sessions kept; a stranger's is not")
	}
	s, err := e.acc.NewInboundSessionFrom(&sender, body)
	if err != nil {
		return nil, fmt.Errorf("a new Olm session: %w", err)
	}
	plain, err := s.Decrypt(body, typ)
	if err != nil {
		return nil, fmt.Errorf("the Olm message: %w", err)
	}
	if err := e.acc.RemoveOneTimeKeys(s); err != nil {
		return nil, err
	}
	list := append(e.olm[sender], s)
	if len(list) > maxOlmPerKey {
		list = list[len(list)-maxOlmPerKey:]
	}
	e.olm[sender] = list
	return plain, e.saveOlm(ctx, sender, s, true)
}

// saveOlm stores an Olm session (with the account when it changed).
func (e *e2ee) saveOlm(ctx context.Context, sender id.Curve25519, s olm.Session, withAccount bool) error {
	p, err := s.Pickle(pickleKey)
	if err != nil {
		return err
	}
	put := map[string][]byte{vaultOlm + string(sender) + "/" + string(s.ID()): p}
	if withAccount {
		return e.saveAccount(ctx, put)
	}
	return e.v.Save(ctx, e.g.Name(), put, nil)
}

// megolmContent is a room event's encrypted content.
type megolmContent struct {
	Algorithm  string          `json:"algorithm"`
	SessionID  id.SessionID    `json:"session_id"`
	Ciphertext string          `json:"ciphertext"`
	RelatesTo  json.RawMessage `json:"m.relates_to"`
}

// decrypt decrypts a room event with the Megolm session it names, which
// must be of the event's room and have come from the event's sender; a
// message index seen before with another event is a replay.
func (e *e2ee) decrypt(_ context.Context, evt *event.Event) (event.Type, json.RawMessage, error) {
	var c megolmContent
	if err := json.Unmarshal(evt.Content.VeryRaw, &c); err != nil || c.Algorithm != megolmAlgoStr || c.Ciphertext == "" {
		return event.Type{}, nil, errors.New("not a Megolm event")
	}
	key := vaultIn + string(evt.RoomID) + "/" + string(c.SessionID)
	e.mu.Lock()
	defer e.mu.Unlock()
	in := e.in[key]
	if in == nil {
		return event.Type{}, nil, errors.New("no room key for its session (not shared with latch's device)")
	}
	if in.User != evt.Sender || in.Room != evt.RoomID {
		return event.Type{}, nil, errors.New("its session was shared by someone else than its sender")
	}
	plain, idx, err := in.s.Decrypt([]byte(c.Ciphertext))
	if err != nil {
		return event.Type{}, nil, fmt.Errorf("megolm: %w", err)
	}
	ik := string(c.SessionID) + "/" + fmt.Sprint(idx)
	if prev, ok := e.seenIdx[ik]; ok && prev != evt.ID {
		return event.Type{}, nil, errors.New("a replayed message index")
	}
	if len(e.seenIdx) >= maxIndexSeen {
		clear(e.seenIdx)
	}
	e.seenIdx[ik] = evt.ID
	var p struct {
		Type    string          `json:"type"`
		Content json.RawMessage `json:"content"`
		RoomID  id.RoomID       `json:"room_id"`
	}
	if err := json.Unmarshal(plain, &p); err != nil || p.RoomID != evt.RoomID || p.Type == "" {
		return event.Type{}, nil, errors.New("the decrypted event is not of this room")
	}
	if p.Type == event.EventEncrypted.Type {
		return event.Type{}, nil, errors.New("an encrypted event inside an encrypted event")
	}
	return event.Type{Type: p.Type, Class: event.MessageEventType}, p.Content, nil
}

// encrypt encrypts content for a room with latch's outbound session,
// first sharing its key over Olm with every device of the room's members
// that lacks it. m.relates_to stays in the clear, as the spec has it.
func (e *e2ee) encrypt(ctx context.Context, rid id.RoomID, typ event.Type, c map[string]any) (any, error) {
	e.send.Lock()
	defer e.send.Unlock()
	out, err := e.outboundFor(ctx, rid)
	if err != nil {
		return nil, err
	}
	if err := e.share(ctx, rid, out); err != nil {
		return nil, fmt.Errorf("sharing the room key: %w", err)
	}
	plain, err := json.Marshal(map[string]any{"type": typ.Type, "content": c, "room_id": rid})
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	ct, err := out.s.Encrypt(plain)
	if err == nil {
		out.Count++
		err = e.saveOut(ctx, rid, out) // the index advanced: stored before the event goes
	}
	e.mu.Unlock()
	if err != nil {
		return nil, err
	}
	enc := map[string]any{"algorithm": megolmAlgoStr, "sender_key": e.curve, "device_id": e.g.cli.DeviceID,
		"session_id": out.s.ID(), "ciphertext": string(ct)}
	if rel, ok := c["m.relates_to"]; ok {
		enc["m.relates_to"] = rel
	}
	return enc, nil
}

func (e *e2ee) saveOut(ctx context.Context, rid id.RoomID, out *outbound) error {
	p, err := out.s.Pickle(pickleKey)
	if err != nil {
		return err
	}
	out.Pickle = p
	b, _ := json.Marshal(out)
	return e.v.Save(ctx, e.g.Name(), map[string][]byte{vaultOut + string(rid): b}, nil)
}

// outboundFor returns the room's outbound session, a new one when there
// is none or it is due for rotation.
func (e *e2ee) outboundFor(ctx context.Context, rid id.RoomID) (*outbound, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if o := e.out[rid]; o != nil && o.Count < rotateAfter && time.Since(o.Created) < rotateEvery {
		return o, nil
	}
	s, err := session.NewMegolmOutboundSession()
	if err != nil {
		return nil, err
	}
	o := &outbound{s: s, Created: time.Now(), Shared: map[string]bool{}}
	if err := e.saveOut(ctx, rid, o); err != nil {
		return nil, err
	}
	e.out[rid] = o
	return o, nil
}

// share sends the session key to the devices of the room's members that
// do not have it yet (latch's own device aside).
func (e *e2ee) share(ctx context.Context, rid id.RoomID, out *outbound) error {
	users, err := e.membersOf(ctx, rid)
	if err != nil {
		return err
	}
	devs, err := e.devicesOf(ctx, users)
	if err != nil {
		return err
	}
	var need []target
	e.mu.Lock()
	for _, u := range users {
		for _, d := range devs[u] {
			if u == e.g.cli.UserID && d.id == e.g.cli.DeviceID {
				continue
			}
			if !out.Shared[string(u)+"|"+string(d.curve)] {
				need = append(need, target{u, d})
			}
		}
	}
	e.mu.Unlock()
	if len(need) == 0 {
		return nil
	}
	e.g.log.Debug("sharing a room key", "chat", string(rid), "devices", len(need))
	if err := e.ensureOlm(ctx, need); err != nil {
		return err
	}
	roomKey := map[string]any{"algorithm": megolmAlgoStr, "room_id": rid, "session_id": out.s.ID(), "session_key": out.s.Key()}
	msgs := map[id.UserID]map[id.DeviceID]*event.Content{}
	e.mu.Lock()
	var sent []string
	for _, t := range need {
		c, err := e.olmEncrypt(ctx, t, "m.room_key", roomKey)
		if err != nil {
			e.g.log.Warn("encrypting the room key for a device failed", "user", string(t.user), "device", string(t.dev.id), "err", err)
			continue
		}
		if msgs[t.user] == nil {
			msgs[t.user] = map[id.DeviceID]*event.Content{}
		}
		msgs[t.user][t.dev.id] = &event.Content{Raw: c}
		sent = append(sent, string(t.user)+"|"+string(t.dev.curve))
	}
	e.mu.Unlock()
	if len(msgs) == 0 {
		return errors.New("no device of the room's members could be given the key")
	}
	err = e.g.call(ctx, func(ctx context.Context) error {
		_, err := e.g.cli.SendToDevice(ctx, event.ToDeviceEncrypted, &mautrix.ReqSendToDevice{Messages: msgs})
		return err
	})
	if err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, k := range sent {
		out.Shared[k] = true
	}
	return e.saveOut(ctx, rid, out)
}

// membersOf returns a room's joined members, from the cache while it is
// fresh (forgetMembers drops it on a membership change).
func (e *e2ee) membersOf(ctx context.Context, rid id.RoomID) ([]id.UserID, error) {
	e.mu.Lock()
	m, ok := e.members[rid]
	e.mu.Unlock()
	if ok && time.Since(m.at) < membersFor {
		return m.users, nil
	}
	var jm *mautrix.RespJoinedMembers
	err := e.g.call(ctx, func(ctx context.Context) (err error) {
		jm, err = e.g.cli.JoinedMembers(ctx, rid)
		return err
	})
	if err != nil {
		return nil, err
	}
	users := make([]id.UserID, 0, len(jm.Joined))
	for u := range jm.Joined {
		users = append(users, u)
	}
	sort.Slice(users, func(i, j int) bool { return users[i] < users[j] })
	e.mu.Lock()
	if len(e.members) >= maxRooms {
		clear(e.members)
	}
	e.members[rid] = members{users, time.Now()}
	e.mu.Unlock()
	return users, nil
}

// forgetMembers drops a room's cached members: someone joined or left.
func (e *e2ee) forgetMembers(rid id.RoomID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.members[rid]; ok {
		delete(e.members, rid)
		if o := e.out[rid]; o != nil {
			o.Count = rotateAfter // someone may have left: a new session
		}
	}
}

type members struct {
	users []id.UserID
	at    time.Time
}

// membersFor is how long a room's members are taken as known.
const membersFor = 5 * time.Minute

type target struct {
	user id.UserID
	dev  device
}

// olmEncrypt encrypts a to-device payload for t with the newest Olm
// session to its device, stored after the ratchet moved. e.mu is held.
func (e *e2ee) olmEncrypt(ctx context.Context, t target, typ string, content any) (map[string]any, error) {
	list := e.olm[t.dev.curve]
	if len(list) == 0 {
		return nil, errors.New("no Olm session")
	}
	s := list[len(list)-1]
	plain, err := json.Marshal(map[string]any{"type": typ, "content": content, "sender": e.g.cli.UserID,
		"sender_device": e.g.cli.DeviceID, "keys": map[string]any{"ed25519": e.ed},
		"recipient": t.user, "recipient_keys": map[string]any{"ed25519": t.dev.ed}})
	if err != nil {
		return nil, err
	}
	mt, ct, err := s.Encrypt(plain)
	if err != nil {
		return nil, err
	}
	if err := e.saveOlm(ctx, t.dev.curve, s, false); err != nil {
		return nil, err
	}
	return map[string]any{"algorithm": olmAlgorithm, "sender_key": e.curve,
		"ciphertext": map[string]any{string(t.dev.curve): map[string]any{"type": mt, "body": string(ct)}}}, nil
}

// ensureOlm makes Olm sessions to the devices that have none, claiming a
// one-time key of each (checked against the device's signature).
func (e *e2ee) ensureOlm(ctx context.Context, need []target) error {
	req := mautrix.OneTimeKeysRequest{}
	e.mu.Lock()
	for _, t := range need {
		if len(e.olm[t.dev.curve]) == 0 {
			if req[t.user] == nil {
				req[t.user] = map[id.DeviceID]id.KeyAlgorithm{}
			}
			req[t.user][t.dev.id] = id.KeyAlgorithmSignedCurve25519
		}
	}
	e.mu.Unlock()
	if len(req) == 0 {
		return nil
	}
	var resp *mautrix.RespClaimKeys
	err := e.g.call(ctx, func(ctx context.Context) (err error) {
		resp, err = e.g.cli.ClaimKeys(ctx, &mautrix.ReqClaimKeys{OneTimeKeys: req, Timeout: 10000})
		return err
	})
	if err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, t := range need {
		for _, otk := range resp.OneTimeKeys[t.user][t.dev.id] {
			if ok, err := signatures.VerifySignatureJSON(otk.RawData, t.user, t.dev.id.String(), t.dev.ed); err != nil || !ok {
				e.g.log.Warn("a one-time key's signature does not verify", "user", string(t.user), "device", string(t.dev.id))
				continue
			}
			s, err := e.acc.NewOutboundSession(t.dev.curve, otk.Key)
			if err != nil {
				continue
			}
			e.olm[t.dev.curve] = append(e.olm[t.dev.curve], s)
			if err := e.saveOlm(ctx, t.dev.curve, s, false); err != nil {
				return err
			}
			break
		}
	}
	return nil
}

// devicesOf returns the devices of users whose keys verify against
// their own signature, from the cache or /keys/query.
func (e *e2ee) devicesOf(ctx context.Context, users []id.UserID) (map[id.UserID]map[id.DeviceID]device, error) {
	out := map[id.UserID]map[id.DeviceID]device{}
	req := mautrix.DeviceKeysRequest{}
	e.mu.Lock()
	for _, u := range users {
		if d, ok := e.devices[u]; ok {
			out[u] = d
		} else {
			req[u] = mautrix.DeviceIDList{}
		}
	}
	e.mu.Unlock()
	if len(req) == 0 {
		return out, nil
	}
	var resp *mautrix.RespQueryKeys
	err := e.g.call(ctx, func(ctx context.Context) (err error) {
		resp, err = e.g.cli.QueryKeys(ctx, &mautrix.ReqQueryKeys{DeviceKeys: req, Timeout: 10000})
		return err
	})
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for u := range req {
		devs := map[id.DeviceID]device{}
		for did, dk := range resp.DeviceKeys[u] {
			ed, curve := dk.Keys.GetEd25519(did), dk.Keys.GetCurve25519(did)
			if dk.UserID != u || dk.DeviceID != did || ed == "" || curve == "" {
				e.g.log.Debug("a device's keys are incomplete", "user", string(u), "device", string(did))
				continue
			}
			if ok, err := signatures.VerifySignatureJSON(&dk, u, did.String(), ed); err != nil || !ok {
				e.g.log.Warn("a device's keys do not verify; it gets no room keys", "user", string(u), "device", string(did))
				continue
			}
			devs[did] = device{id: did, ed: ed, curve: curve}
		}
		e.devices[u] = devs
		out[u] = devs
	}
	return out, nil
}

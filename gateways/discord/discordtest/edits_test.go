package discordtest

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestEditRate: the per-channel edit model answers 429 with retry_after
// and the bucket's headers past its limit, counts an edit that ignores
// retry_after as early, and lets edits through again once the window has
// passed; other channels have buckets of their own.
func TestEditRate(t *testing.T) {
	s := newServer(t)
	s.SetEditRate(2, 200*time.Millisecond)
	var clock sync.Mutex
	now := time.Now()
	s.SetEditClock(func() time.Time { clock.Lock(); defer clock.Unlock(); return now })
	ch := s.DMChannel(alice)
	var m wireMessage
	call(t, s, "POST", "channels/"+ch+"/messages", map[string]any{"content": "v0"}, true, &m)
	edit := func(content string) (*http.Response, apiError) {
		t.Helper()
		var e apiError
		resp := patch(t, s, "channels/"+ch+"/messages/"+m.ID, map[string]any{"content": content}, &e)
		return resp, e
	}

	if r, _ := edit("v1"); r.StatusCode != 200 || r.Header.Get("X-RateLimit-Limit") != "2" || r.Header.Get("X-RateLimit-Remaining") != "1" {
		t.Fatalf("first edit: %d %v", r.StatusCode, r.Header)
	}
	if r, _ := edit("v2"); r.StatusCode != 200 || r.Header.Get("X-RateLimit-Remaining") != "0" {
		t.Fatalf("second edit: %d %v", r.StatusCode, r.Header)
	}
	r, e := edit("v3")
	if r.StatusCode != 429 || e.Message != "You are being rate limited." || r.Header.Get("Retry-After") != "1" {
		t.Fatalf("third edit: %d %+v %v, want 429", r.StatusCode, e, r.Header)
	}
	if st := s.RateStats(); st.Exceeded != 1 || st.Early != 0 {
		t.Errorf("after the 429: %+v", st)
	}
	if r, _ := edit("v3"); r.StatusCode != 429 {
		t.Errorf("an edit at once after the 429: %d", r.StatusCode)
	}
	if st := s.RateStats(); st.Exceeded != 2 || st.Early != 1 {
		t.Errorf("after an early edit: %+v, want it counted early", st)
	}
	if got := s.Sent()[0].Text(); got != "v2" {
		t.Errorf("the message shows %q, want the refused edits not applied", got)
	}
	other := s.DMChannel(bob)
	var m2 wireMessage
	call(t, s, "POST", "channels/"+other+"/messages", map[string]any{"content": "x"}, true, &m2)
	if r := patch(t, s, "channels/"+other+"/messages/"+m2.ID, map[string]any{"content": "y"}, nil); r.StatusCode != 200 {
		t.Errorf("an edit in another channel: %d", r.StatusCode)
	}
	clock.Lock()
	now = now.Add(250 * time.Millisecond) // the window passes
	clock.Unlock()
	if r, _ := edit("v4"); r.StatusCode != 200 {
		t.Errorf("an edit after the window: %d", r.StatusCode)
	}
	// An injected 429 also blocks the channel for its retry_after.
	s.SetEditRate(0, 0)
	s.Inject(RouteEditMessage, Fault{Status: 429, RetryAfter: 5})
	edit("v5")
	s.SetEditRate(100, time.Second)
	if r, _ := edit("v5"); r.StatusCode != 429 || s.RateStats().Early != 2 {
		t.Errorf("an edit during an injected retry_after: %d %+v", r.StatusCode, s.RateStats())
	}
}

// TestEditFlagsAndMentions: an edit records its allowed_mentions and may
// change SUPPRESS_EMBEDS only; a bot deletes its own messages only.
func TestEditFlagsAndMentions(t *testing.T) {
	s := newServer(t)
	ch := s.DMChannel(alice)
	var m wireMessage
	call(t, s, "POST", "channels/"+ch+"/messages", map[string]any{"content": "v0"}, true, &m)
	var e apiError
	if r := patch(t, s, "channels/"+ch+"/messages/"+m.ID, map[string]any{"content": "v1", "flags": FlagEphemeral}, &e); r.StatusCode != 400 || e.Code != 50035 {
		t.Errorf("edit setting EPHEMERAL: %d %+v", r.StatusCode, e)
	}
	body := map[string]any{"content": "v1", "flags": FlagSuppressEmbeds, "allowed_mentions": map[string]any{"parse": []string{}}}
	patch(t, s, "channels/"+ch+"/messages/"+m.ID, body, nil)
	patch(t, s, "channels/"+ch+"/messages/"+m.ID, map[string]any{"content": "v2 <@" + alice.ID + ">"}, nil)
	edits := s.Sent()[0].Edits
	if len(edits) != 2 || !edits[0].NoPings() || edits[0].Flags != FlagSuppressEmbeds || edits[1].NoPings() || edits[1].Flags != FlagSuppressEmbeds {
		t.Errorf("edits = %+v", edits)
	}
	user := s.SendDM(alice, "mine")
	if code := call(t, s, "DELETE", "channels/"+ch+"/messages/"+user.ID, nil, true, &e); code != 403 {
		t.Errorf("deleting alice's message: %d", code)
	}
	req, _ := http.NewRequest("DELETE", s.URL()+"/api/v10/channels/"+ch+"/messages/"+m.ID, nil)
	req.Header.Set("Authorization", "Bot "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 204 || !s.Sent()[0].Deleted || len(s.History(ch)) != 1 {
		t.Errorf("deleting the bot's message: %d, sent %+v, history %d", resp.StatusCode, s.Sent()[0], len(s.History(ch)))
	}
}

var bob = User{ID: "300000000000000002", Username: "bob"}

// patch sends a PATCH with the bot token and decodes the answer into out
// (if not nil); the body is closed.
func patch(t *testing.T, s *Server, path string, body any, out any) *http.Response {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest("PATCH", s.URL()+"/api/v10/"+path, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bot "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil {
		_ = json.NewDecoder(resp.Body).Decode(out)
	}
	return resp
}

// TestContentLimitEverywhere: every way a bot puts content in a message —
// create, edit, an interaction's response (a new message or an update), a
// follow-up, an edit of the original response — is held to 2000 code
// points, as Discord holds it: 2001 is refused with 50035, 2000 taken.
func TestContentLimitEverywhere(t *testing.T) {
	s := newServer(t)
	ch := s.DMChannel(alice)
	over, limit := strings.Repeat("é", MaxContent+1), strings.Repeat("é", MaxContent)
	rows := []Row{{Type: 1, Components: []Button{{Type: 2, Style: 3, Label: "OK", CustomID: "approve:x"}}}}
	var m wireMessage
	if code := call(t, s, "POST", "channels/"+ch+"/messages", map[string]any{"content": "ok?", "components": rows}, true, &m); code != 200 {
		t.Fatalf("create: %d", code)
	}
	press := func() Interaction {
		t.Helper()
		in, err := s.PressButton(alice, ch, m.ID, "approve:x")
		if err != nil {
			t.Fatal(err)
		}
		return in
	}
	pressed, deferred := press(), press()
	callback := func(in Interaction) string { return "interactions/" + in.ID + "/" + in.Token + "/callback" }
	send := func(method, path string, body any, want int) (int, apiError) {
		t.Helper()
		var e apiError
		var out any = &e
		if want == http.StatusNoContent {
			out = nil // no body to decode
		}
		if method == "PATCH" {
			r := patch(t, s, path, body, out)
			return r.StatusCode, e
		}
		return call(t, s, method, path, body, strings.HasPrefix(path, "channels/"), out), e
	}
	steps := []struct {
		name, method, path string
		body               any
		want               int
	}{
		{"create", "POST", "channels/" + ch + "/messages", map[string]any{"content": over}, 400},
		{"edit", "PATCH", "channels/" + ch + "/messages/" + m.ID, map[string]any{"content": over}, 400},
		{"edit at the limit", "PATCH", "channels/" + ch + "/messages/" + m.ID, map[string]any{"content": limit}, 200},
		{"update response", "POST", callback(pressed), map[string]any{"type": 7, "data": map[string]any{"content": over}}, 400},
		{"message response", "POST", callback(pressed), map[string]any{"type": 4, "data": map[string]any{"content": over}}, 400},
		{"deferred update", "POST", callback(pressed), map[string]any{"type": 6}, 204},
		{"follow-up", "POST", "webhooks/" + s.Bot().ID + "/" + pressed.Token, map[string]any{"content": over}, 400},
		{"follow-up at the limit", "POST", "webhooks/" + s.Bot().ID + "/" + pressed.Token, map[string]any{"content": limit}, 204},
		{"deferred message", "POST", callback(deferred), map[string]any{"type": 5}, 204},
		{"edit original", "PATCH", "webhooks/" + s.Bot().ID + "/" + deferred.Token + "/messages/@original", map[string]any{"content": over}, 400},
		{"edit original at the limit", "PATCH", "webhooks/" + s.Bot().ID + "/" + deferred.Token + "/messages/@original", map[string]any{"content": limit}, 200},
	}
	for _, st := range steps {
		code, e := send(st.method, st.path, st.body, st.want)
		if code != st.want || code == 400 && (e.Code != 50035 || !strings.Contains(string(e.Errors), "BASE_TYPE_MAX_LENGTH")) {
			t.Errorf("%s: %d %+v, want %d", st.name, code, e, st.want)
		}
	}
}

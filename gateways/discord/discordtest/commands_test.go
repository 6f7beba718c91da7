package discordtest

import (
	"encoding/json"
	"testing"
)

var pairCmd = map[string]any{
	"name": "pair", "description": "Pair this chat", "type": 1, "contexts": []int{ContextBotDM}, "integration_types": []int{0},
	"options": []map[string]any{{"type": OptionString, "name": "code", "description": "The code", "required": true, "max_length": 64}},
}

// TestCommandsBulkOverwrite: PUT replaces the commands (ids kept across
// overwrites), checks them as Discord does, and only for the bot's own
// application.
func TestCommandsBulkOverwrite(t *testing.T) {
	s := newServer(t)
	path := "applications/" + s.Bot().ID + "/commands"
	var got []Command
	if code := call(t, s, "PUT", path, []any{pairCmd}, true, &got); code != 200 || len(got) != 1 || got[0].ID == "" || got[0].ApplicationID != s.Bot().ID {
		t.Fatalf("PUT = %d %+v", code, got)
	}
	first := got[0].ID
	call(t, s, "PUT", path, []any{pairCmd}, true, &got)
	if cmds := s.Commands(); len(cmds) != 1 || cmds[0].ID != first || cmds[0].Options[0].MaxLength != 64 {
		t.Errorf("after a second PUT: %+v", cmds)
	}
	var e apiError
	for _, bad := range []map[string]any{
		{"name": "Pair", "description": "upper case"},
		{"name": "pair", "description": ""},
		{"name": "pair", "description": "x", "contexts": []int{7}},
		{"name": "pair", "description": "x", "options": []map[string]any{
			{"type": 3, "name": "a", "description": "optional"}, {"type": 3, "name": "b", "description": "required", "required": true}}},
	} {
		if code := call(t, s, "PUT", path, []any{bad}, true, &e); code != 400 || e.Code != 50035 {
			t.Errorf("PUT %v = %d %+v, want 400 Invalid Form Body", bad, code, e)
		}
	}
	if code := call(t, s, "PUT", "applications/42/commands", []any{pairCmd}, true, &e); code != 403 {
		t.Errorf("PUT for another application = %d", code)
	}
	if len(s.Commands()) != 1 {
		t.Error("a refused PUT changed the commands")
	}
}

// TestInvokeCommand: a use of a registered command reaches the session as
// INTERACTION_CREATE; a use a client would not offer fails; a deferred
// ephemeral response gets its content by editing @original.
func TestInvokeCommand(t *testing.T) {
	s := newServer(t)
	call(t, s, "PUT", "applications/"+s.Bot().ID+"/commands", []any{pairCmd}, true, nil)
	c := dial(t, s)
	c.send(opIdentify, map[string]any{"token": "Bot " + token, "intents": IntentDirectMessages})
	c.dispatch("READY", 1)
	for _, bad := range []CommandUse{
		{User: alice, Name: "other"},
		{User: alice, Name: "pair"},
		{User: alice, Name: "pair", Options: map[string]string{"code": string(make([]byte, 65))}},
		{User: alice, Name: "pair", Options: map[string]string{"code": "x"}, GuildID: "900000000000000001"},
	} {
		if _, err := s.InvokeCommand(bad); err == nil {
			t.Errorf("InvokeCommand(%+v) worked", bad)
		}
	}
	in, err := s.InvokeCommand(CommandUse{User: alice, Name: "pair", Options: map[string]string{"code": "ABCD-EFGH"}})
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		ID        string `json:"id"`
		Type      int    `json:"type"`
		Context   int    `json:"context"`
		ChannelID string `json:"channel_id"`
		User      struct {
			ID string `json:"id"`
		} `json:"user"`
		Data struct {
			Name    string `json:"name"`
			Options []struct {
				Name  string `json:"name"`
				Type  int    `json:"type"`
				Value string `json:"value"`
			} `json:"options"`
		} `json:"data"`
	}
	_ = json.Unmarshal(c.dispatch("INTERACTION_CREATE", 2).D, &d)
	if d.ID != in.ID || d.Type != 2 || d.Context != ContextBotDM || d.ChannelID != s.DMChannel(alice) || d.User.ID != alice.ID ||
		d.Data.Name != "pair" || len(d.Data.Options) != 1 || d.Data.Options[0].Value != "ABCD-EFGH" || d.Data.Options[0].Type != OptionString {
		t.Errorf("INTERACTION_CREATE = %+v", d)
	}

	original := "webhooks/" + s.Bot().ID + "/" + in.Token + "/messages/@original"
	var e apiError
	if r := patch(t, s, original, map[string]any{"content": "early"}, &e); r.StatusCode != 404 || e.Code != 10008 {
		t.Errorf("editing @original before responding: %d %+v", r.StatusCode, e)
	}
	cb := "interactions/" + in.ID + "/" + in.Token + "/callback"
	if code := call(t, s, "POST", cb, map[string]any{"type": ResponseDeferredUpdate}, false, &e); code != 400 {
		t.Errorf("DEFERRED_UPDATE_MESSAGE to a command: %d", code)
	}
	if code := call(t, s, "POST", cb, map[string]any{"type": ResponseDeferredChannelMessage, "data": map[string]any{"flags": FlagEphemeral}}, false, nil); code != 204 {
		t.Fatalf("deferred response: %d", code)
	}
	if r, ok := s.Response(in.ID); !ok || !r.Deferred || !r.Ephemeral || r.Text() != "" {
		t.Errorf("deferred response = %+v", r)
	}
	body := map[string]any{"content": "Paired.", "allowed_mentions": map[string]any{"parse": []string{}}}
	if r := patch(t, s, original, body, nil); r.StatusCode != 200 {
		t.Errorf("editing @original: %d", r.StatusCode)
	}
	if r, _ := s.Response(in.ID); r.Text() != "Paired." || !r.Edits[0].NoPings() || r.Edits[0].Via != "webhook" {
		t.Errorf("response after the edit = %+v", r)
	}
	if r := patch(t, s, "webhooks/"+s.Bot().ID+"/wrong/messages/@original", body, &e); r.StatusCode != 404 || e.Code != 10015 {
		t.Errorf("editing with a wrong token: %d %+v", r.StatusCode, e)
	}
	if h := s.History(s.DMChannel(alice)); len(h) != 0 {
		t.Errorf("the ephemeral response is in the channel's history: %+v", h)
	}
}

package telegram

import (
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/latchd/latch/gateways"
)

// refUpdate reads only the ids of an update, independently of the
// library's types, to check what decode attributes a message to.
type refUpdate struct {
	UpdateID *int `json:"update_id"`
	Message  *struct {
		Chat *struct {
			ID int64 `json:"id"`
		} `json:"chat"`
		From *struct {
			ID int64 `json:"id"`
		} `json:"from"`
	} `json:"message"`
	CallbackQuery *struct {
		From *struct {
			ID int64 `json:"id"`
		} `json:"from"`
		Message *struct {
			Chat *struct {
				ID int64 `json:"id"`
			} `json:"chat"`
		} `json:"message"`
	} `json:"callback_query"`
}

// FuzzTranslate feeds raw updates, as getUpdates returns them and webhooks
// deliver them, to the decoder. It must not panic, must attribute a
// message only to the chat and user the update names, and must keep every
// field within its bound. The seeds in testdata/fuzz/FuzzTranslate run as
// part of go test.
func FuzzTranslate(f *testing.F) {
	g := New(Config{Token: testToken}, slog.New(slog.DiscardHandler))
	f.Fuzz(func(t *testing.T, data []byte) {
		u := g.decode(data)
		checkDecoded(t, data, u)
		if !json.Valid(data) {
			return
		}
		// The polling path must agree with the webhook path.
		b := g.translate([]json.RawMessage{data}, 0, seen{})
		valid := u.hasID && u.id > 0 && u.id <= maxUpdateID
		switch {
		case valid != (len(b.ids) == 1):
			t.Fatalf("translate took ids %v, decode says id %d (hasID=%t)", b.ids, u.id, u.hasID)
		case valid && u.ok != (len(b.msgs) == 1):
			t.Fatalf("translate kept %d messages, decode says ok=%t", len(b.msgs), u.ok)
		case valid && b.ids[0] != u.id:
			t.Fatalf("translate took id %d, want %d", b.ids[0], u.id)
		}
	})
}

func checkDecoded(t *testing.T, data []byte, u update) {
	t.Helper()
	if !u.ok {
		return
	}
	var ref refUpdate
	if err := json.Unmarshal(data, &ref); err != nil {
		t.Fatalf("decode produced a message from an update the reference cannot read: %v", err)
	}
	if !u.hasID || ref.UpdateID == nil || *ref.UpdateID != u.id {
		t.Fatalf("update id %d (hasID %t), reference %v", u.id, u.hasID, ref.UpdateID)
	}
	m := u.msg
	var chat, user int64
	switch {
	case m.Callback != nil:
		q := ref.CallbackQuery
		if q == nil || q.From == nil || q.Message == nil || q.Message.Chat == nil {
			t.Fatalf("a callback message from an update without a full callback_query: %+v", m)
		}
		chat, user = q.Message.Chat.ID, q.From.ID
		if n := len(m.Callback.Data); n == 0 || n > maxCallbackData {
			t.Fatalf("callback data of %d bytes", n)
		}
		if m.Callback.ID == "" || len(m.Callback.ID) > maxIDBytes || m.Callback.MessageID != m.ID {
			t.Fatalf("callback %+v", m.Callback)
		}
	default:
		r := ref.Message
		if r == nil || r.Chat == nil || r.From == nil {
			t.Fatalf("a message from an update without message.chat and message.from: %+v", m)
		}
		chat, user = r.Chat.ID, r.From.ID
	}
	if m.ChatID != strconv.FormatInt(chat, 10) || m.UserID != strconv.FormatInt(user, 10) {
		t.Fatalf("message attributed to chat %s user %s, the update says chat %d user %d", m.ChatID, m.UserID, chat, user)
	}
	if m.Gateway != gatewayName {
		t.Fatalf("gateway %q", m.Gateway)
	}
	switch m.ChatType {
	case gateways.ChatPrivate, gateways.ChatGroup, gateways.ChatChannel:
	default:
		t.Fatalf("chat type %q", m.ChatType)
	}
	if n := utf16Len(m.Text); n > maxInboundUnits {
		t.Fatalf("text of %d UTF-16 units", n)
	}
	if m.Text == "" && len(m.Files) == 0 && m.Callback == nil {
		t.Fatal("a message with neither text, files nor a callback")
	}
	for _, s := range []string{m.ChatName, m.UserName} {
		if len(s) > maxNameBytes || !utf8.ValidString(s) {
			t.Fatalf("name %q: %d bytes", s, len(s))
		}
	}
	if len(m.Files) > 4 {
		t.Fatalf("%d attachments", len(m.Files))
	}
	for _, a := range m.Files {
		if a.ID == "" || len(a.ID) > maxIDBytes || len(a.Name) > maxFileNameLen || !utf8.ValidString(a.Name) ||
			len(a.MIME) > maxMIMEBytes {
			t.Fatalf("attachment %+v", a)
		}
	}
}

// readSeed reads one file of the checked-in corpus.
func readSeed(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "fuzz", "FuzzTranslate", name))
	if err != nil {
		t.Fatal(err)
	}
	_, lit, ok := strings.Cut(strings.TrimSpace(string(b)), "\n")
	lit, ok2 := strings.CutPrefix(lit, "[]byte(")
	lit, ok3 := strings.CutSuffix(lit, ")")
	s, err := strconv.Unquote(lit)
	if !ok || !ok2 || !ok3 || err != nil {
		t.Fatalf("seed %s is not a corpus file: %v", name, err)
	}
	return []byte(s)
}

// TestFuzzSeeds pins what the corpus decodes to, so that it covers both
// the updates latch takes and those it skips.
func TestFuzzSeeds(t *testing.T) {
	g := New(Config{Token: testToken}, slog.New(slog.DiscardHandler))
	tests := []struct {
		seed  string
		hasID bool
		want  string // text, callback data or first file kind; "" = skipped
	}{
		{"text", true, "hello latch"},
		{"pair_code", true, "/pair ABCD-2345"},
		{"start_deep_link", true, "/start ABCD2345"},
		{"bang_command", true, "!uptime"},
		{"caption_document", true, "the report"},
		{"photo_sizes", true, "photo"},
		{"voice", true, "voice"},
		{"audio", true, "audio"},
		{"sticker_only", true, "[The owner sent a sticker: 👍]"},
		{"group", true, "/status@latch_home_bot"},
		{"supergroup_reply", true, "yes"},
		{"callback_query", true, "approve:k3x9p"},
		{"callback_inline", true, ""},
		{"edited_message", true, ""},
		{"channel_post", true, ""},
		{"my_chat_member", true, ""},
		{"unicode_names", true, "ça va? 😀"},
		{"malformed_truncated", false, ""},
		{"malformed_types", true, ""},
		{"no_update_id", false, ""},
		{"not_an_object", false, ""},
		{"null", false, ""},
		{"huge_ids", true, "edge"},
		{"duplicate_keys", true, "first"},
		{"case_folded_keys", true, "shouty"},
		{"secret_chat_type", true, ""},
		{"no_sender", true, ""},
		{"oversized_text", true, ""},
	}
	entries, err := os.ReadDir(filepath.Join("testdata", "fuzz", "FuzzTranslate"))
	if err != nil || len(entries) != len(tests) {
		t.Fatalf("corpus has %d seeds (%v), the table %d", len(entries), err, len(tests))
	}
	for _, tt := range tests {
		u := g.decode(readSeed(t, tt.seed))
		got := ""
		switch {
		case !u.ok:
		case u.msg.Callback != nil:
			got = u.msg.Callback.Data
		case u.msg.Text != "":
			got = u.msg.Text
		default:
			got = u.msg.Files[0].Kind
		}
		if u.hasID != tt.hasID || got != tt.want {
			t.Errorf("%s: hasID %t, got %q; want %t, %q", tt.seed, u.hasID, got, tt.hasID, tt.want)
		}
	}
	// The duplicate chat key: the last one counts, for the reference too.
	if u := g.decode(readSeed(t, "duplicate_keys")); u.msg.ChatID != "2222" {
		t.Errorf("duplicate_keys attributed to chat %s", u.msg.ChatID)
	}
	if u := g.decode(readSeed(t, "photo_sizes")); u.msg.Files[0].ID != "AgACAgIAAxkBAAIBRGZfa-large" {
		t.Errorf("photo_sizes kept %+v, want the largest", u.msg.Files)
	}
}

func TestDecodeBounds(t *testing.T) {
	g := New(Config{Token: testToken}, slog.New(slog.DiscardHandler))
	long := strings.Repeat("é", 400) // 800 bytes
	upd := map[string]any{
		"update_id": 7,
		"message": map[string]any{
			"message_id": 1, "date": 1, "caption": "files",
			"chat":     map[string]any{"id": -5, "type": "group", "title": long},
			"from":     map[string]any{"id": 9, "first_name": long},
			"document": map[string]any{"file_id": strings.Repeat("d", maxIDBytes+1), "file_name": "x"},
			"voice":    map[string]any{"file_id": "voice-ok", "mime_type": strings.Repeat("m", maxMIMEBytes+1)},
			"audio":    map[string]any{"file_id": "audio-ok", "file_name": long},
		},
	}
	data, _ := json.Marshal(upd)
	u := g.decode(data)
	if !u.ok {
		t.Fatal("update skipped")
	}
	m := u.msg
	if len(m.ChatName) > maxNameBytes || len(m.UserName) > maxNameBytes || !utf8.ValidString(m.ChatName) {
		t.Errorf("names of %d and %d bytes, want ≤ %d and whole characters", len(m.ChatName), len(m.UserName), maxNameBytes)
	}
	if len(m.Files) != 2 || m.Files[0].Kind != "voice" || m.Files[0].MIME != "" || len(m.Files[1].Name) > maxFileNameLen {
		t.Errorf("files = %+v, want the oversized id dropped, the MIME emptied, the name clipped", m.Files)
	}
}

package discord

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/latchd/latch/gateways"
	"github.com/latchd/latch/gateways/discord/discordtest"
)

func TestSendChunksWithinLimitAndPingsNoOne(t *testing.T) {
	srv := newFake(t)
	g, _ := started(t, srv)
	ch := srv.DMChannel(alice)
	orig := srv.SendDM(alice, "question")
	var b strings.Builder
	for i := 0; b.Len() < 5000; i++ {
		b.WriteString(strings.Repeat("word ", 40) + "@everyone <@" + alice.ID + "> https://example.com/x\n\n")
	}
	text := strings.TrimSpace(b.String())
	id, err := g.Send(testContext(t), ch, gateways.Reply{Text: text, ReplyTo: orig.ID})
	if err != nil {
		t.Fatal(err)
	}
	sent := srv.SentTo(ch)
	if len(sent) < 3 || sent[len(sent)-1].ID != id {
		t.Fatalf("sent %d messages, last %q; want at least 3, the last one's id returned (%s)", len(sent), sent[len(sent)-1].ID, id)
	}
	var joined strings.Builder
	for i, m := range sent {
		if n := utf8.RuneCountInString(m.Content); n > 2000 {
			t.Errorf("message %d has %d characters", i, n)
		}
		if !m.NoPings() {
			t.Errorf("message %d: allowed_mentions = %s, want {\"parse\": []}", i, m.AllowedMentions)
		}
		if m.Flags&discordtest.FlagSuppressEmbeds == 0 {
			t.Errorf("message %d: flags = %d, want link previews suppressed", i, m.Flags)
		}
		if (i == 0) != (m.ReplyTo == orig.ID) {
			t.Errorf("message %d replies to %q; only the first should reply to %s", i, m.ReplyTo, orig.ID)
		}
		if i < len(sent)-1 && !strings.HasSuffix(m.Content, "\n\n") {
			t.Errorf("message %d was not cut between paragraphs: ends %q", i, m.Content[max(0, len(m.Content)-20):])
		}
		joined.WriteString(m.Content)
	}
	if joined.String() != text {
		t.Error("the messages joined do not give the text back")
	}
	var raw map[string]any
	if err := json.Unmarshal(sent[0].AllowedMentions, &raw); err != nil || raw["parse"] == nil {
		t.Errorf("allowed_mentions = %s, want parse to be an empty list, not null", sent[0].AllowedMentions)
	}
}

func TestSendPreBlocksAcrossMessages(t *testing.T) {
	srv := newFake(t)
	g, _ := started(t, srv)
	ch := srv.DMChannel(alice)
	var b strings.Builder
	for i := 0; b.Len() < 4500; i++ {
		b.WriteString("line with ``` fence and *stars* " + strings.Repeat("x", 30) + "\n")
	}
	if _, err := g.Send(testContext(t), ch, gateways.Reply{Text: b.String(), Pre: true}); err != nil {
		t.Fatal(err)
	}
	sent := srv.SentTo(ch)
	if len(sent) < 3 {
		t.Fatalf("sent %d messages, want at least 3", len(sent))
	}
	for i, m := range sent {
		c := m.Content
		if !strings.HasPrefix(c, "```\n") || !strings.HasSuffix(c, "\n```") || strings.Count(c, "```") != 2 {
			t.Errorf("message %d is not exactly one code block: %q…%q", i, c[:20], c[len(c)-20:])
		}
		if utf8.RuneCountInString(c) > 2000 {
			t.Errorf("message %d has %d characters", i, utf8.RuneCountInString(c))
		}
	}
}

func TestSendErrors(t *testing.T) {
	srv := newFake(t)
	g, _ := started(t, srv)
	ch := srv.DMChannel(alice)
	ctx := testContext(t)
	if _, err := g.Send(ctx, "not-an-id", gateways.Reply{Text: "x"}); err == nil || !strings.Contains(err.Error(), "invalid channel id") {
		t.Errorf("Send to a bad id = %v", err)
	}
	if _, err := g.Send(ctx, ch, gateways.Reply{Text: " \n "}); err != ErrEmptyReply {
		t.Errorf("Send of blank text = %v, want ErrEmptyReply", err)
	}
	if _, err := g.Send(ctx, "123456789", gateways.Reply{Text: "x"}); !isAPI(err, 404, 10003) {
		t.Errorf("Send to an unknown channel = %v, want the API's 404 Unknown Channel", err)
	}
	if g.Info().LastError == "" {
		t.Error("Info().LastError is empty after a failed send")
	}
}

func TestSendWaitsOutRateLimits(t *testing.T) {
	srv := newFake(t)
	g, logs := started(t, srv)
	ch := srv.DMChannel(alice)
	srv.Inject(discordtest.RouteCreateMessage, discordtest.Fault{Status: 429, RetryAfter: 0.05})
	if _, err := g.Send(testContext(t), ch, gateways.Reply{Text: "hello"}); err != nil {
		t.Fatalf("Send = %v, want success after the 429", err)
	}
	if n := srv.Count(discordtest.RouteCreateMessage); n != 2 {
		t.Errorf("%d requests, want the 429 then the retry", n)
	}
	if len(logs.lines("rate limited by Discord")) != 1 {
		t.Errorf("the wait was not logged; logs:\n%s", logs)
	}

	// One that never ends gives up.
	srv.Inject(discordtest.RouteCreateMessage, discordtest.Fault{Status: 429, RetryAfter: 0.01, Times: -1})
	if _, err := g.Send(testContext(t), ch, gateways.Reply{Text: "hello"}); !isAPI(err, 429, 0) {
		t.Errorf("Send = %v, want the 429 after %d attempts", err, maxAttempts)
	}
}

// TestRateLimitWithoutJSONBody: a 429 that is not Discord's own (a
// Cloudflare page: no JSON body, at most a Retry-After header) is waited
// out as its header asks, else for at least a second, and the call made
// again.
func TestRateLimitWithoutJSONBody(t *testing.T) {
	tests := []struct {
		name       string
		retryAfter string
		wantWait   time.Duration
	}{
		{"no Retry-After", "", minBlindWait},
		{"Retry-After", "2", 2 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newFake(t)
			g, logs := started(t, srv)
			ch := srv.DMChannel(alice)
			f := discordtest.Fault{Status: 429, Body: "<html><h1>Error 1015</h1> You are being rate limited</html>"}
			if tt.retryAfter != "" {
				f.Headers = map[string]string{"Retry-After": tt.retryAfter}
			}
			srv.Inject(discordtest.RouteCreateMessage, f)
			start := time.Now()
			if _, err := g.Send(testContext(t), ch, gateways.Reply{Text: "hello"}); err != nil {
				t.Fatalf("Send = %v, want success after the 429", err)
			}
			calls := srv.Calls(discordtest.RouteCreateMessage)
			if len(calls) != 2 {
				t.Fatalf("%d requests, want the 429 then the retry", len(calls))
			}
			if gap := calls[1].Time.Sub(calls[0].Time); gap < tt.wantWait {
				t.Errorf("retried after %v, want at least %v", gap, tt.wantWait)
			}
			if time.Since(start) > tt.wantWait+5*time.Second {
				t.Errorf("Send took %v, want about %v", time.Since(start), tt.wantWait)
			}
			if len(logs.lines("rate limited by Discord")) != 1 {
				t.Errorf("the wait was not logged; logs:\n%s", logs)
			}
		})
	}
}

func TestTyping(t *testing.T) {
	srv := newFake(t)
	g, _ := started(t, srv)
	g.Typing(testContext(t), srv.DMChannel(alice))
	g.Typing(testContext(t), "123") // unknown: ignored
	if n := srv.Count(discordtest.RouteTyping); n != 2 {
		t.Errorf("%d typing requests, want 2", n)
	}
}

func TestChunk(t *testing.T) {
	long := strings.Repeat("a", 30)
	tests := []struct {
		name  string
		text  string
		limit int
		want  []string
	}{
		{"fits", "hello", 10, []string{"hello"}},
		{"paragraphs first", "aaaa bbbb\ncc\n\ndd", 14, []string{"aaaa bbbb\ncc\n\n", "dd"}},
		{"then lines", "aaaa bbbb\ncccc dddd", 14, []string{"aaaa bbbb\n", "cccc dddd"}},
		{"then words", "aaaa bbbb cccc dddd", 12, []string{"aaaa bbbb ", "cccc dddd"}},
		{"then characters", long, 12, []string{long[:12], long[12:24], long[24:]}},
		{"fence reopened", "```go\nx := 1\ny := 2\nz := 3\n```\nafter", 20,
			[]string{"```go\nx := 1\n```", "```go\ny := 2\n```", "```go\nz := 3\n```\n", "after"}},
		{"emoji count once", "😀😀😀😀", 3, []string{"😀😀😀", "😀"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := chunk(tt.text, tt.limit)
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Errorf("chunk(%q, %d) =\n%q\nwant\n%q", tt.text, tt.limit, got, tt.want)
			}
		})
	}
}

// FuzzChunk checks chunk's promises on any text: every chunk within the
// limit, the pieces joined give the text back, and every chunk closes the
// code blocks it opens (but the last, if the text leaves one open).
func FuzzChunk(f *testing.F) {
	f.Add("hello world\n\n```py\nprint(1)\n```\nbye", 40)
	f.Add(strings.Repeat("```\nx\n", 30), 30)
	f.Add("a b c", 1)
	f.Fuzz(func(t *testing.T, text string, limit int) {
		if !utf8.ValidString(text) {
			return
		}
		limit = 30 + int(uint(limit)%3000)
		balanced := true // a fence line longer than a chunk must be cut
		for _, line := range strings.Split(text, "\n") {
			if isFenceLine(line) && utf8.RuneCountInString(line) > limit-maxOpener-len(fenceClose)-1 {
				balanced = false
			}
		}
		parts := chunkParts(text, limit)
		var back strings.Builder
		for i, p := range parts {
			c := p.prefix + p.body + p.suffix
			if n := utf8.RuneCountInString(c); n > limit {
				t.Fatalf("chunk %d has %d > %d characters", i, n, limit)
			}
			// A chunk that starts mid-line (a long line cut between words)
			// may start with what reads as a fence; only chunks that start
			// at a line must balance their blocks.
			atLine := back.Len() == 0 || strings.HasSuffix(back.String(), "\n")
			rs := []rune(c + "\n") // the state after a last fence line shows after its end
			if balanced && atLine && i < len(parts)-1 && fenceStates(rs)[len(rs)] != "" {
				t.Fatalf("chunk %d leaves a code block open: %q", i, c)
			}
			back.WriteString(p.body)
		}
		if back.String() != text {
			t.Fatalf("the pieces do not give the text back:\n%q\n%q", back.String(), text)
		}
	})
}

// TestSendButtons: a Reply's buttons (the Hub's latch approval request)
// go under the message as one row, with their payloads as custom ids.
func TestSendButtons(t *testing.T) {
	srv := newFake(t)
	g, _ := started(t, srv)
	ch := srv.DMChannel(alice)
	_, err := g.Send(testContext(t), ch, gateways.Reply{Text: "Approve a new latch?", Markdown: true,
		Buttons: []gateways.Button{{Label: "Approve the latch", Data: "latch-ok:ABCD2345"}, {Label: "Deny", Data: "latch-no:ABCD2345"}}})
	if err != nil {
		t.Fatal(err)
	}
	sent := srv.SentTo(ch)
	if len(sent) != 1 || len(sent[0].Components) != 1 {
		t.Fatalf("sent %+v, want one message with one row of buttons", sent)
	}
	row := sent[0].Components[0].Components
	if len(row) != 2 || row[0].CustomID != "latch-ok:ABCD2345" || row[1].CustomID != "latch-no:ABCD2345" {
		t.Errorf("buttons %+v", row)
	}
}

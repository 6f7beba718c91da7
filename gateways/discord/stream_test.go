package discord

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/latchd/latch/gateways"
	"github.com/latchd/latch/gateways/discord/discordtest"
	"github.com/latchd/latch/turn"
)

// randomMarkdown is text with what moves chunk boundaries: paragraphs,
// lines, long words, code blocks with and without a language, fence-like
// lines indented and not, and backticks inline.
func randomMarkdown(r *rand.Rand, n int) string {
	pieces := []string{
		"word ", "another ", "x", "supercalifragilistic", "\n", "\n\n", "```", "```go\n", "```\n", "\n```\n",
		"    ```\n", "  ```py\n", "`code` ", "``", " ", "\t", "é", "🙂", "> quote\n", "- item\n",
	}
	var b strings.Builder
	for utf8.RuneCountInString(b.String()) < n {
		b.WriteString(pieces[r.IntN(len(pieces))])
	}
	return b.String()
}

// TestStreamChunksFinal: a chunk shown as final while the text streams is
// the chunk the complete text has in its place, for every prefix the text
// streams through; the growing chunk fits a message.
func TestStreamChunksFinal(t *testing.T) {
	const limit = 40
	for seed := range uint64(100) {
		r := rand.New(rand.NewPCG(seed, 7))
		full := randomMarkdown(r, 300)
		want := render0(full, limit)
		rs := []rune(full)
		for n := 0; n <= len(rs); n++ {
			final, growing := streamChunksN(string(rs[:n]), limit)
			if len(final) > len(want) || !slices.Equal(final, want[:len(final)]) {
				t.Fatalf("seed %d, prefix %d: final chunks\n%q\nare not a prefix of the complete text's\n%q", seed, n, final, want)
			}
			if utf8.RuneCountInString(growing) > limit {
				t.Fatalf("seed %d, prefix %d: growing chunk of %d code points", seed, n, utf8.RuneCountInString(growing))
			}
			if n == len(rs) && growing != "" && (len(final) == len(want) || growing != want[len(final)]) {
				t.Fatalf("seed %d: the complete text grows %q after\n%q\nwant\n%q", seed, growing, final, want)
			}
		}
	}
}

// render0 is render's chunking for a limit.
func render0(text string, limit int) []string {
	var out []string
	for _, c := range chunk(text, limit) {
		if !blank(c) {
			out = append(out, c)
		}
	}
	return out
}

// essay is n code points of prose in paragraphs, with what must not ping
// or unfurl: @everyone, a user mention, a link.
func essay(n int) string {
	words := []string{"latch", "streams", "its", "answer", "@everyone", "<@300000000000000002>", "into", "Discord,",
		"https://example.com/leak?d=1", "edited", "in", "place;", "é", "🙂", "chunks", "join", "back."}
	var b strings.Builder
	for i := 0; utf8.RuneCountInString(b.String()) < n; i++ {
		b.WriteString(words[i%len(words)])
		switch {
		case i%97 == 96:
			b.WriteString("\n\n")
		case i%13 == 12:
			b.WriteString("\n")
		default:
			b.WriteString(" ")
		}
	}
	return string([]rune(b.String())[:n])
}

// shownIn is what a channel shows of the bot's messages, oldest first.
func shownIn(srv *discordtest.Server, ch string) []string {
	var out []string
	for _, s := range srv.SentTo(ch) {
		if !s.Deleted && !s.Ephemeral {
			out = append(out, s.Text())
		}
	}
	return out
}

// streamShows is what a streaming answer shows for text.
func streamShows(text string) []string {
	final, growing := streamChunks(text)
	if growing != "" {
		final = append(final, growing)
	}
	return final
}

// streamer feeds a turn an answer in small pieces.
type streamer struct {
	ev     turn.Events
	rs     []rune
	at     int
	deltas int
}

func (s *streamer) to(n int) string {
	for s.at < n {
		k := min(7, n-s.at)
		s.ev.Text(string(s.rs[s.at : s.at+k]))
		s.at += k
		s.deltas++
	}
	return string(s.rs[:n])
}

// TestStreamLongAnswer: a 5,000-character answer streams into a message
// that is edited as the text comes, goes on in a new message past 2,000
// characters, and ends as exactly the messages Send would have sent. Edits
// stay within the fake's per-channel edit rate (equal to the gateway's
// pace), a 429 is waited out as asked, and no message or edit pings
// anyone or unfurls a link.
func TestStreamLongAnswer(t *testing.T) {
	srv := newFake(t)
	const pace = 40 * time.Millisecond
	srv.SetEditRate(1, pace)
	g, _ := started(t, srv, func(c *Config) { c.EditInterval = pace })
	in := srv.SendDM(alice, "write me an essay")
	ch := in.ChannelID
	ev := g.RenderTurn(testContext(t), ch, in.ID)
	text := essay(5000)
	feed := &streamer{ev: ev, rs: []rune(text)}

	so := feed.to(1500)
	waitFake(t, srv, "the first 1,500 characters in one message", func() bool { return slices.Equal(shownIn(srv, ch), streamShows(so)) })
	// A 429 on the next edit: the edit comes again after retry_after.
	srv.Inject(discordtest.RouteEditMessage, discordtest.Fault{Status: 429, RetryAfter: 0.5})
	so = feed.to(3500)
	waitFake(t, srv, "3,500 characters in two messages", func() bool { return slices.Equal(shownIn(srv, ch), streamShows(so)) })
	if n := len(shownIn(srv, ch)); n != 2 {
		t.Fatalf("3,500 characters stream as %d messages, want 2", n)
	}
	feed.to(len(feed.rs))
	ev.Final(text)

	got, want := shownIn(srv, ch), render(gateways.Reply{Text: text})
	if !slices.Equal(got, want) || len(got) != 3 {
		t.Fatalf("the channel shows %d messages\n%q\nwant Send's %d\n%q", len(got), got, len(want), want)
	}
	if strings.Join(got, "") != text {
		t.Error("the messages do not join back to the answer")
	}
	edits := 0
	for i, s := range srv.SentTo(ch) {
		if utf8.RuneCountInString(s.Text()) > maxContent || !s.NoPings() || s.Flags&discordtest.FlagSuppressEmbeds == 0 {
			t.Errorf("message %d: %d characters, allowed_mentions %s, flags %d", i, utf8.RuneCountInString(s.Text()), s.AllowedMentions, s.Flags)
		}
		if wantReply := map[bool]string{true: in.ID, false: ""}[i == 0]; s.ReplyTo != wantReply {
			t.Errorf("message %d replies to %q, want %q", i, s.ReplyTo, wantReply)
		}
		for _, e := range s.Edits {
			edits++
			if !e.NoPings() || e.Flags&discordtest.FlagSuppressEmbeds == 0 || e.Via != "patch" {
				t.Errorf("an edit of message %d allows mentions %s, has flags %d, via %s", i, e.AllowedMentions, e.Flags, e.Via)
			}
		}
	}
	stats := srv.RateStats()
	if stats.Injected != 1 || stats.Exceeded != 0 {
		t.Errorf("rate stats %+v: want the one injected 429 taken, no edit over the rate or before retry_after", stats)
	}
	if edits == 0 || edits >= feed.deltas/2 {
		t.Errorf("%d edits for %d pieces of text: want them coalesced", edits, feed.deltas)
	}
}

// TestStreamEndedMidStream: a turn stopped or failed mid-answer (End
// without Final) leaves exactly the chunks of what streamed, also when
// the text stops in a half-written code fence line.
func TestStreamEndedMidStream(t *testing.T) {
	srv := newFake(t)
	g, _ := started(t, srv)
	in := srv.SendDM(alice, "go")
	ch := in.ChannelID
	ev := g.RenderTurn(testContext(t), ch, in.ID)
	text := essay(2600) + "\n```go"
	feed := &streamer{ev: ev, rs: []rune(text)}
	so := feed.to(2600)
	waitFake(t, srv, "2,600 characters in two messages", func() bool { return slices.Equal(shownIn(srv, ch), streamShows(so)) })
	feed.to(len(feed.rs))
	ev.(interface{ End() }).End()
	if got, want := shownIn(srv, ch), render(gateways.Reply{Text: text}); !slices.Equal(got, want) {
		t.Errorf("the channel shows\n%q\nwant\n%q", got, want)
	}
}

// TestStreamFinalDiffers: should the step's final text not be the one that
// streamed, the messages are brought in line with it; surplus ones are
// deleted.
func TestStreamFinalDiffers(t *testing.T) {
	srv := newFake(t)
	g, _ := started(t, srv)
	in := srv.SendDM(alice, "go")
	ch := in.ChannelID
	ev := g.RenderTurn(testContext(t), ch, in.ID)
	text := essay(4500)
	feed := &streamer{ev: ev, rs: []rune(text)}
	so := feed.to(len(feed.rs))
	waitFake(t, srv, "4,500 characters in three messages", func() bool { return slices.Equal(shownIn(srv, ch), streamShows(so)) })
	ev.Final("In short: no.")
	if got := shownIn(srv, ch); !slices.Equal(got, []string{"In short: no."}) {
		t.Errorf("the channel shows %q", got)
	}
	if n := srv.Count(discordtest.RouteDeleteMessage); n != 2 {
		t.Errorf("%d messages deleted, want 2", n)
	}
}

// TestQuickAnswerIsOneMessage: an answer complete within an edit interval
// of its first text goes out once, as Send cuts it, replying to the
// question — no streamed message, no edit.
func TestQuickAnswerIsOneMessage(t *testing.T) {
	srv := newFake(t)
	g, _ := started(t, srv, func(c *Config) { c.EditInterval = time.Second })
	in := srv.SendDM(alice, "how many?")
	ch := in.ChannelID
	ev := g.RenderTurn(testContext(t), ch, in.ID)
	ev.Text("Done: **3** files")
	time.Sleep(200 * time.Millisecond)
	ev.Text(" changed.")
	ev.Final("Done: **3** files changed.")
	ev.(interface{ End() }).End()
	sent := srv.SentTo(ch)
	if len(sent) != 1 || len(sent[0].Edits) != 0 {
		t.Fatalf("sent %+v, want one message and no edit", sent)
	}
	if s := sent[0]; s.Text() != "Done: **3** files changed." || s.ReplyTo != in.ID {
		t.Errorf("message %q replying to %q, want the answer replying to %q", s.Text(), s.ReplyTo, in.ID)
	}
}

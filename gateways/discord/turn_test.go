package discord

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/latchd/latch/gateways"
	"github.com/latchd/latch/gateways/discord/discordtest"
	"github.com/latchd/latch/turn"
)

func TestRenderTurn(t *testing.T) {
	srv := newFake(t)
	g, _ := started(t, srv)
	in := srv.SendDM(alice, "what is here?")
	ch := in.ChannelID
	ev := g.RenderTurn(testContext(t), ch, in.ID)
	end := ev.(interface{ End() })

	ev.Text("Let me look.")
	c1 := turn.ToolCall{ID: "c1", Name: "bash", Summary: "ls *.go"}
	ev.ToolStarted(c1)
	// The line shows the running call until the call ends. (Events that
	// come faster than Discord is called coalesce: wait for it.)
	if _, err := srv.WaitSent(testContext(t), func(s discordtest.Sent) bool { return s.Content == "⚙ bash: `ls *.go`" }); err != nil {
		t.Fatal(err)
	}
	ev.ToolFinished(c1, turn.ToolResult{Duration: 1200 * time.Millisecond})
	ev.ToolFinished(turn.ToolCall{ID: "c2", Name: "write_file", Summary: "x.txt"}, turn.ToolResult{Denied: true})
	c3 := turn.ToolCall{ID: "c3", Name: "read_file", Summary: "nope"}
	ev.ToolStarted(c3)
	ev.ToolFinished(c3, turn.ToolResult{Err: errors.New("no such file\nmore detail"), Duration: 10 * time.Millisecond})
	if err := ev.File(turn.File{Name: "report.txt", Data: []byte("42")}); err != nil {
		t.Fatal(err)
	}
	ev.Text("Done.")
	ev.Final("Done.")
	end.End() // again: nothing more
	end.End()

	sent := srv.SentTo(ch)
	want := []struct{ text, replyTo string }{
		{"Let me look.", in.ID},
		{"✓ bash: `ls *.go` · 1.2s", ""},
		{"✗ write\\_file: `x.txt` · denied", ""},
		{"✗ read\\_file: `nope` · 0.0s\n`no such file`", ""},
		{"", in.ID}, // the file
		{"Done.", in.ID},
	}
	if len(sent) != len(want) {
		t.Fatalf("sent %d messages, want %d: %+v", len(sent), len(want), sent)
	}
	for i, w := range want {
		if sent[i].Text() != w.text || sent[i].ReplyTo != w.replyTo || !sent[i].NoPings() {
			t.Errorf("message %d = %q replying to %q, want %q replying to %q", i, sent[i].Text(), sent[i].ReplyTo, w.text, w.replyTo)
		}
	}
	if sent[1].Content != "⚙ bash: `ls *.go`" {
		t.Errorf("the running tool showed %q", sent[1].Content)
	}
	if f := sent[4].Files; len(f) != 1 || f[0].Name != "report.txt" || string(f[0].Data) != "42" {
		t.Errorf("file message = %+v", sent[4])
	}
	if srv.Count(discordtest.RouteTyping) == 0 {
		t.Error("no typing indicator during the turn")
	}
}

// TestRenderTurnEndWithoutFinal: a turn that ends in an error has no
// Final; End still shows what was said.
func TestRenderTurnEndWithoutFinal(t *testing.T) {
	srv := newFake(t)
	g, _ := started(t, srv)
	in := srv.SendDM(alice, "go")
	ev := g.RenderTurn(testContext(t), in.ChannelID, in.ID)
	ev.Text("partial ")
	ev.Text("answer")
	ev.(interface{ End() }).End()
	ev.(interface{ End() }).End()
	sent := srv.SentTo(in.ChannelID)
	if len(sent) != 1 || sent[0].Content != "partial answer" || sent[0].ReplyTo != in.ID {
		t.Errorf("sent %+v, want the partial answer once, threaded", sent)
	}
}

// TestAnswerOutlastsServerErrors: a 500 and a dropped connection on the
// second message of a three-message answer, then on its final edit: the
// call is made again, so every message arrives, in order, as Send would
// have cut it.
func TestAnswerOutlastsServerErrors(t *testing.T) {
	srv := newFake(t)
	g, _ := started(t, srv)
	in := srv.SendDM(alice, "write an essay")
	text := essay(5000)
	want := render(replyOf(text))
	if len(want) != 3 {
		t.Fatalf("the essay is %d messages, want 3", len(want))
	}
	srv.Inject(discordtest.RouteCreateMessage, discordtest.Fault{}, discordtest.Fault{Status: 500}, discordtest.Fault{Hangup: true})
	ev := g.RenderTurn(testContext(t), in.ChannelID, in.ID)
	ev.Text(text)
	ev.Final(text)
	ev.(interface{ End() }).End()
	if got := shownIn(srv, in.ChannelID); !slices.Equal(got, want) {
		t.Errorf("shown %d messages %.80q…, want the %d chunks", len(got), got, len(want))
	}
	if n := srv.Count(discordtest.RouteCreateMessage); n != 5 {
		t.Errorf("%d message creations, want 5: 3 and 2 more tries", n)
	}

	// An edit to the final text.
	in = srv.SendDM(alice, "and?")
	ev = g.RenderTurn(testContext(t), in.ChannelID, in.ID)
	ev.Text("Let me look")
	if _, err := srv.WaitSent(testContext(t), func(s discordtest.Sent) bool { return s.Content == "Let me look" }); err != nil {
		t.Fatal(err)
	}
	srv.Inject(discordtest.RouteEditMessage, discordtest.Fault{Status: 503, Times: 2})
	ev.Text(" — found it.")
	ev.Final("Let me look — found it.")
	ev.(interface{ End() }).End()
	if got := shownIn(srv, in.ChannelID); got[len(got)-1] != "Let me look — found it." {
		t.Errorf("the answer shows %q, want it edited to its final text", got[len(got)-1])
	}
}

// TestAnswerSaysWhatIsLost: a message of an answer that cannot be
// delivered — a 500 that persists, or a 4xx, which is not tried again —
// is not dropped silently: a notice says part of the answer is missing.
func TestAnswerSaysWhatIsLost(t *testing.T) {
	tests := []struct {
		name    string
		fault   discordtest.Fault
		creates int
	}{
		{"persistent 500", discordtest.Fault{Status: 500, Times: answerTries}, 2 + answerTries},
		{"400", discordtest.Fault{Status: 400, Code: 50035, Message: "Invalid Form Body"}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newFake(t)
			g, _ := started(t, srv)
			in := srv.SendDM(alice, "write an essay")
			text := essay(5000)
			want := render(replyOf(text))
			srv.Inject(discordtest.RouteCreateMessage, discordtest.Fault{}, tt.fault)
			ev := g.RenderTurn(testContext(t), in.ChannelID, in.ID)
			ev.Text(text)
			ev.Final(text)
			ev.(interface{ End() }).End()
			if got := shownIn(srv, in.ChannelID); !slices.Equal(got, []string{want[0], undeliveredNotice}) {
				t.Errorf("shown %.80q, want the first chunk and the notice", got)
			}
			if n := srv.Count(discordtest.RouteCreateMessage); n != tt.creates {
				t.Errorf("%d message creations, want %d", n, tt.creates)
			}
		})
	}
}

// TestSendOutlastsServerErrors: a plain reply (a !command's output, a
// notice) is tried again on a 5xx or a dropped connection too, so no chunk
// of it goes missing.
func TestSendOutlastsServerErrors(t *testing.T) {
	srv := newFake(t)
	g, _ := started(t, srv)
	in := srv.SendDM(alice, "!cat big.log")
	text := essay(5000)
	want := render(replyOf(text))
	srv.Inject(discordtest.RouteCreateMessage, discordtest.Fault{}, discordtest.Fault{Status: 500}, discordtest.Fault{Hangup: true})
	if _, err := g.Send(testContext(t), in.ChannelID, replyOf(text)); err != nil {
		t.Fatalf("Send: %v", err)
	}
	if got := shownIn(srv, in.ChannelID); !slices.Equal(got, want) {
		t.Errorf("shown %d messages, want the %d chunks once each", len(got), len(want))
	}
}

// TestSendSaysWhenRefused: a reply Discord refuses (a 4xx other than 429)
// is gateways.ErrRejected, so the Hub drops a notice at once.
func TestSendSaysWhenRefused(t *testing.T) {
	srv := newFake(t)
	g, _ := started(t, srv)
	in := srv.SendDM(alice, "hello")
	srv.Inject(discordtest.RouteCreateMessage, discordtest.Fault{Status: 403, Code: 50007, Message: "Cannot send messages to this user"})
	if _, err := g.Send(testContext(t), in.ChannelID, replyOf("hi")); !errors.Is(err, gateways.ErrRejected) {
		t.Errorf("refused send: %v, want ErrRejected", err)
	}
}

// TestRenderTurnVerbosity: [discord] verbosity works as Telegram's: quiet
// shows no tool line, verbose the first lines of a failure.
func TestRenderTurnVerbosity(t *testing.T) {
	for _, tt := range []struct {
		verbosity string
		want      []string
	}{
		{turn.VerbosityQuiet, []string{"Done."}},
		{turn.VerbosityVerbose, []string{"✗ read\\_file: `nope` · 0.0s\n`no such file\nmore detail`", "Done."}},
	} {
		t.Run(tt.verbosity, func(t *testing.T) {
			srv := newFake(t)
			g, _ := started(t, srv, func(c *Config) { c.Verbosity = tt.verbosity })
			in := srv.SendDM(alice, "what is here?")
			ev := g.RenderTurn(testContext(t), in.ChannelID, in.ID)
			c := turn.ToolCall{ID: "c1", Name: "read_file", Summary: "nope"}
			ev.ToolStarted(c)
			ev.ToolFinished(c, turn.ToolResult{Err: errors.New("no such file\nmore detail"), Duration: 10 * time.Millisecond})
			ev.Text("Done.")
			ev.Final("Done.")
			ev.(interface{ End() }).End()
			var got []string
			for _, s := range srv.SentTo(in.ChannelID) {
				got = append(got, s.Text())
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("sent %q, want %q", got, tt.want)
			}
		})
	}
}

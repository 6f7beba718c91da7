package discord

import (
	"errors"
	"testing"
	"time"

	"github.com/latchd/latch/agent"
	"github.com/latchd/latch/gateways/discord/discordtest"
)

func TestRenderTurn(t *testing.T) {
	srv := newFake(t)
	g, _ := started(t, srv)
	in := srv.SendDM(alice, "what is here?")
	ch := in.ChannelID
	ev := g.RenderTurn(testContext(t), ch, in.ID)
	end := ev.(interface{ End() })

	ev.Text("Let me look.")
	c1 := agent.ToolCall{ID: "c1", Name: "bash", Summary: "ls *.go"}
	ev.ToolStarted(c1)
	// The line shows the running call until the call ends. (Events that
	// come faster than Discord is called coalesce: wait for it.)
	if _, err := srv.WaitSent(testContext(t), func(s discordtest.Sent) bool { return s.Content == "⚙ bash: `ls *.go`" }); err != nil {
		t.Fatal(err)
	}
	ev.ToolFinished(c1, agent.ToolResult{Duration: 1200 * time.Millisecond})
	ev.ToolFinished(agent.ToolCall{ID: "c2", Name: "write_file", Summary: "x.txt"}, agent.ToolResult{Denied: true})
	c3 := agent.ToolCall{ID: "c3", Name: "read_file", Summary: "nope"}
	ev.ToolStarted(c3)
	ev.ToolFinished(c3, agent.ToolResult{Err: errors.New("no such file\nmore detail"), Duration: 10 * time.Millisecond})
	if err := ev.File(agent.File{Name: "report.txt", Data: []byte("42")}); err != nil {
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

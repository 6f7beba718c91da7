package daemon

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/latchd/latch/agent/provider/anthropic/anthropictest"
	"github.com/latchd/latch/gateways/discord/discordtest"
	"github.com/latchd/latch/pairing"
)

// TestE2EDiscordPairCommandStreamedAnswer: pairing through the /pair
// application command (the reply in place of its ephemeral response, the
// code in no log line), then an agent answer that streams into one
// message, threaded to the question, and is edited into place.
func TestE2EDiscordPairCommandStreamedAnswer(t *testing.T) {
	e := newEnv(t)
	model := withModel(e)
	fake := withDiscord(e)
	e.start()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := fake.Wait(ctx, func() bool { return len(fake.Commands()) == 1 }); err != nil {
		t.Fatalf("the /pair command was not registered: %v", err)
	}
	code := e.mintFor("discord")
	in, err := fake.InvokeCommand(discordtest.CommandUse{User: dAlice, Name: "pair", Options: map[string]string{"code": code}})
	if err != nil {
		t.Fatal(err)
	}
	err = fake.Wait(ctx, func() bool {
		r, ok := fake.Response(in.ID)
		return ok && strings.HasPrefix(r.Text(), "Paired.")
	})
	if err != nil {
		t.Fatalf("no \"Paired.\" in place of /pair's response: %v", err)
	}

	// The stream pauses after its first pieces: they show in a message of
	// their own, and the rest arrives by editing it.
	answer := "The disk is 42% full. " + strings.Repeat("All services run normally. ", 8) + "Nothing needs attention."
	model.Script(anthropictest.Text(answer).Chunk(20).PauseAfter(2, 3*time.Second))
	dm := fake.DMChannel(dAlice)
	q := fake.SendDM(dAlice, "how is the server?")
	m := waitDiscord(t, fake, dm, answer)
	if m.Text() != answer || m.ReplyTo != q.ID || len(m.Edits) == 0 || m.Content == answer || !m.NoPings() {
		t.Errorf("answer = %+v: want a reply to %s edited into place", m, q.ID)
	}
	for _, ed := range m.Edits {
		if !ed.NoPings() {
			t.Errorf("an edit allows mentions: %s", ed.AllowedMentions)
		}
	}
	logs := e.logs.String()
	for _, secret := range []string{code, pairing.Format(code)} {
		if strings.Contains(logs, secret) {
			t.Errorf("the pairing code is in the logs")
		}
	}
}

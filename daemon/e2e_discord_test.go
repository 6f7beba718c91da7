package daemon

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/latchd/latch/agent/provider/anthropic/anthropictest"
	"github.com/latchd/latch/config"
	"github.com/latchd/latch/gateways/discord/discordtest"
)

const discordToken = "MTIzNDU2Nzg5MDEyMzQ1Njc4OQ.GabcDE.e2eDISCORDsecret-hmacValue_0123456789ab"

var (
	dAlice = discordtest.User{ID: "300000000000000001", Username: "alice"}
	dBob   = discordtest.User{ID: "300000000000000002", Username: "bob"}
)

// withDiscord adds a Discord gateway on a fake to e's daemons.
func withDiscord(e *env) *discordtest.Server {
	fake := discordtest.New(discordToken)
	e.t.Cleanup(fake.Close)
	prev := e.tweak
	e.tweak = func(c *config.Config) {
		if prev != nil {
			prev(c)
		}
		c.Discord.Token, c.Discord.APIURL = discordToken, fake.URL()
	}
	return fake
}

func waitDiscord(t *testing.T, fake *discordtest.Server, channel, want string) discordtest.Sent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := fake.WaitSent(ctx, func(s discordtest.Sent) bool {
		text := s.Content
		if len(s.Edits) > 0 {
			text = s.Edits[len(s.Edits)-1].Content
		}
		return s.ChannelID == channel && strings.Contains(text, want)
	})
	if err != nil {
		t.Fatalf("no Discord message to %s containing %q: %v", channel, want, err)
	}
	return m
}

// TestE2EDiscord: pairing by DM, strangers ignored, !echo, and messages sent
// while the daemon was down handled after the restart exactly once.
func TestE2EDiscord(t *testing.T) {
	e := newEnv(t)
	fake := withDiscord(e)
	r := e.start()
	code := e.mintFor("discord")
	fake.SendDM(dAlice, "/pair "+code)
	dm := fake.DMChannel(dAlice)
	waitDiscord(t, fake, dm, "Paired")
	fake.SendDM(dBob, "/pair "+code)
	fake.SendDM(dBob, "!id")
	fake.SendDM(dAlice, "!echo hi from discord")
	m := waitDiscord(t, fake, dm, "hi from discord")
	if !strings.Contains(string(m.AllowedMentions), `"parse":[]`) {
		t.Errorf("allowed_mentions = %s: replies could ping", m.AllowedMentions)
	}
	if got := fake.SentTo(fake.DMChannel(dBob)); len(got) != 0 {
		t.Errorf("a stranger got %d replies", len(got))
	}
	r.stop(t)

	fake.AddDMHistory(dAlice, "!echo while-down")
	e.start()
	waitDiscord(t, fake, dm, "while-down")
	fake.SendDM(dAlice, "!echo after")
	waitDiscord(t, fake, dm, "after")
	n := 0
	for _, s := range fake.SentTo(dm) {
		if strings.HasPrefix(s.Content, "```\nwhile-down") || strings.HasPrefix(s.Content, "while-down") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("the message sent while down was answered %d times", n)
	}
	if strings.Contains(e.logs.String(), "e2eDISCORDsecret") {
		t.Error("the Discord token is in the logs")
	}
}

// TestE2EDiscordAgentApprovalButton: an agent turn over Discord whose tool
// call is approved by pressing the button; another user's press does nothing.
func TestE2EDiscordAgentApprovalButton(t *testing.T) {
	e := newEnv(t)
	model := withModel(e)
	fake := withDiscord(e)
	e.start()
	code := e.mintFor("discord")
	fake.SendDM(dAlice, "/pair "+code)
	dm := fake.DMChannel(dAlice)
	waitDiscord(t, fake, dm, "Paired")
	model.Script(
		anthropictest.ToolUse("toolu_1", "bash", `{"command":"echo pressed > pressed.txt"}`),
		anthropictest.Text("Done over Discord."),
	)
	fake.SendDM(dAlice, "please run it")
	m := waitDiscord(t, fake, dm, "bash")
	var custom string
	for _, b := range m.Buttons() {
		if strings.HasPrefix(b.CustomID, "approve:") {
			custom = b.CustomID
		}
	}
	if custom == "" {
		t.Fatalf("no approve button on %q", m.Text())
	}
	fake.PressButton(dBob, dm, m.ID, custom)
	fake.PressButton(dAlice, dm, m.ID, custom)
	waitDiscord(t, fake, dm, "Done over Discord.")
	if b, _ := os.ReadFile(filepath.Join(e.home, "workspace", "pressed.txt")); string(b) != "pressed\n" {
		t.Fatalf("pressed.txt = %q", b)
	}
}

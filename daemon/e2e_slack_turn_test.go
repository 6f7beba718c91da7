package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/latchd/latch/agent/provider/anthropic/anthropictest"
	"github.com/latchd/latch/gateways"
	"github.com/latchd/latch/gateways/slack/slacktest"
)

// TestE2ESlackStreamedAnswer: an agent answer that streams arrives as one
// message that chat.update edits into place, in mrkdwn that can neither
// ping (<!channel>, <!here>, <@U…> in the model's output) nor show a link
// under a label that hides where it goes; the ⏳ reaction on the question
// is taken back once the turn ends.
func TestE2ESlackStreamedAnswer(t *testing.T) {
	_, model, fake, dm := slackWithModel(t)
	answer := "The disk is **42%** full <!channel> <!here> <@U0BOB>. " + strings.Repeat("All services run normally. ", 8) +
		"See [the docs](https://evil.example/x) or <http://evil.example|slack.com>."
	model.Script(anthropictest.Text(answer).Chunk(20).PauseAfter(2, 3*time.Second))
	q := fake.SendDM(sAlice, "how is the server?")
	m := waitSlack(t, fake, dm, "slack.com")
	if m.Edits == 0 || countSlack(fake, dm, "The disk is") != 1 {
		t.Errorf("the answer was not one message edited into place: %d edits, %d messages", m.Edits, countSlack(fake, dm, "The disk is"))
	}
	if m.Pings() || strings.ContainsAny(m.Text, "<>") {
		t.Errorf("the answer %q holds a control sequence", m.Text)
	}
	for _, want := range []string{"*42%*", "the docs (https://evil.example/x)"} {
		if !strings.Contains(m.Shown(), want) {
			t.Errorf("the answer %q lacks %q", m.Shown(), want)
		}
	}
	waitFor(t, func() bool {
		for _, h := range fake.History(dm) {
			if h.TS == q {
				return len(h.Reactions) == 0
			}
		}
		return false
	})
	if fake.Count("reactions.add") == 0 {
		t.Error("no working signal (reactions.add) while the turn ran")
	}
}

// TestE2ESlackFilesBothWays: a file the owner shares is downloaded with the
// bot token into the workspace inbox and named to the model; one announced
// over the cap is not fetched at all; a file the agent sends, once its
// approval button is pressed, goes up by the external upload flow.
func TestE2ESlackFilesBothWays(t *testing.T) {
	e, model, fake, dm := slackWithModel(t)
	content := []byte("%PDF-1.7\x00\x01binary\xffcontent")
	model.Script(anthropictest.Text("Got your file."))
	fake.SendDM(sAlice, "keep this", fake.AddFile("report.pdf", "application/pdf", content))
	waitSlack(t, fake, dm, "Got your file.")
	body := string(model.Requests()[0].Body)
	_, rest, ok := strings.Cut(body, "saved in the workspace as ")
	if !ok || !strings.Contains(body, "keep this") {
		t.Fatalf("the model was not told about the file: %s", body)
	}
	rel := rest[:strings.IndexAny(rest, "]\\\"")]
	if saved, err := os.ReadFile(filepath.Join(e.home, "workspace", rel)); err != nil || string(saved) != string(content) {
		t.Fatalf("saved %s = %q, %v", rel, saved, err)
	}

	big := fake.AddFile("huge.bin", "application/octet-stream", []byte("small really"))
	big.Size = gateways.MaxInboundFile + 1
	downloads := fake.Count("files.download")
	model.Script(anthropictest.Text("Too big, noted."))
	fake.SendDM(sAlice, "and this", big)
	waitSlack(t, fake, dm, "Too big, noted.")
	if body := string(model.Requests()[1].Body); !strings.Contains(body, "not downloaded") {
		t.Errorf("the model was not told the file is over the cap: %s", body)
	}
	if n := fake.Count("files.download"); n != downloads {
		t.Errorf("a file announced over the cap was downloaded (%d downloads)", n-downloads)
	}

	out := []byte("\x89PNG-not-really\x00data")
	if err := os.WriteFile(filepath.Join(e.home, "workspace", "result.bin"), out, 0o600); err != nil {
		t.Fatal(err)
	}
	model.Script(
		anthropictest.ToolUse("toolu_2", "send_file", `{"path":"result.bin"}`),
		anthropictest.Text("Sent it."),
	)
	fake.SendDM(sAlice, "send me result.bin")
	req := waitSlack(t, fake, dm, "send_file")
	fake.Press(sAlice, dm, req.TS, approvePayload(req))
	waitSlack(t, fake, dm, "Sent it.")
	var sent *slacktest.File
	for _, m := range fake.Sent(dm) {
		if len(m.Files) == 1 {
			sent = &m.Files[0]
		}
	}
	if sent == nil || string(sent.Data()) != string(out) || sent.Name != "result.bin" {
		t.Fatalf("file sent = %+v", sent)
	}
	if fake.Count("files.getUploadURLExternal") != 1 || fake.Count("files.completeUploadExternal") != 1 {
		t.Errorf("the upload did not take the external flow")
	}
}

// TestE2ESlackOversized: an approval whose command is far over a section
// block's 3,000 characters, and an answer of some 35,000 characters whose
// every &, < and > grows fivefold when escaped, all reach the owner within
// Slack's limits (the fake refuses a message over them, as Slack does,
// with invalid_blocks or msg_too_long): the request shortened, with its
// buttons, the answer cut into messages, none lost, none pinging.
func TestE2ESlackOversized(t *testing.T) {
	_, model, fake, dm := slackWithModel(t)
	answer := strings.Repeat("A line with a & b < c > d and <!channel> in it.\n", 700) + "END-MARK"
	model.Script(
		anthropictest.ToolUse("toolu_1", "bash", `{"command":"echo `+strings.Repeat("&<>", 2000)+` > /dev/null"}`),
		anthropictest.Text(answer),
	)
	fake.SendDM(sAlice, "go")
	req := waitSlack(t, fake, dm, "bash")
	if !req.HasButtons() {
		t.Fatalf("the oversized request lost its buttons: %q", req.Shown())
	}
	fake.Press(sAlice, dm, req.TS, approvePayload(req))
	waitSlack(t, fake, dm, "END-MARK")
	parts := 0
	for _, m := range fake.Sent(dm) {
		if strings.Contains(m.Shown(), "could not be delivered") {
			t.Errorf("a part was lost: %q", m.Shown())
		}
		if m.Pings() {
			t.Errorf("a message would ping: %.80q", m.Text)
		}
		if strings.Contains(m.Shown(), "A line with") {
			parts++
		}
	}
	if want := len(escapeForCount(answer))/slacktest.MaxText + 1; parts < want {
		t.Errorf("the answer came in %d messages, want at least %d", parts, want)
	}
	if n := countSlack(fake, dm, "A line with a & b < c > d and <!channel> in it."); n == 0 {
		t.Error("the answer's lines do not show as written")
	}
}

// escapeForCount is text as Slack's escapes lengthen it.
func escapeForCount(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

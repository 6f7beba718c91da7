package discord_test

import (
	"bytes"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/latchd/latch/gateways"
	"github.com/latchd/latch/gateways/discord/discordtest"
	"github.com/latchd/latch/store"
)

// memFiles is a gateways.FileStore in memory.
type memFiles struct {
	mu    sync.Mutex
	saved map[string][]byte
}

func (f *memFiles) SaveInbox(name string, _ int64, fill func(io.Writer) error) (string, error) {
	var b bytes.Buffer
	if err := fill(&b); err != nil {
		return "", err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.saved[name] = b.Bytes()
	return "inbox/" + name, nil
}

func (f *memFiles) get(name string) []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.saved[name]
}

// TestForwardsAndStickersWithHub, under the real Hub: a stranger who
// forwards someone's "/pair CODE" with a file pairs nothing and causes no
// download; the owner's forwarded "!command" is not run but goes on as
// text (here: no model, so the Hub says so); the owner's forwarded file is
// downloaded; a sticker is answered rather than dropped.
func TestForwardsAndStickersWithHub(t *testing.T) {
	d := newDaemon(t)
	files := &memFiles{saved: map[string][]byte{}}
	d.files = files
	owner := discordtest.User{ID: "300000000000000001", Username: "owner"}
	stranger := discordtest.User{ID: "300000000000000002", Username: "stranger"}
	d.start()

	var code string
	if err := d.db.Update(func(tx *store.Tx) (err error) {
		code, _, err = d.pairer.Mint(tx, "discord", 0)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	bait := discordtest.File{Name: "bait.txt", ContentType: "text/plain", Data: []byte("bait")}
	d.srv.Post(discordtest.Post{Author: stranger, Forward: &discordtest.Snapshot{Content: "/pair " + code, Files: []discordtest.File{bait}}})
	strangerDM := d.srv.DMChannel(stranger)
	d.until(func() bool { return d.strangers() == 1 || len(d.srv.SentTo(strangerDM)) > 0 },
		func() string { return "the stranger's forward was neither dropped nor answered" })
	if sent := d.srv.SentTo(strangerDM); len(sent) != 0 {
		t.Fatalf("the stranger's forwarded /pair got %q", sent[0].Text())
	}
	d.srv.SendDM(owner, "/pair "+code)
	d.waitText(gateways.MsgPaired)

	d.srv.Post(discordtest.Post{Author: owner, Forward: &discordtest.Snapshot{Content: "!echo forwarded"}})
	s, err := d.srv.WaitSent(d.ctx, func(s discordtest.Sent) bool {
		return s.Text() == gateways.MsgNoModel || strings.Contains(s.Text(), "ran echo forwarded")
	})
	if err != nil || s.Text() != gateways.MsgNoModel {
		t.Errorf("the owner's forwarded !command was answered %q (%v), want %q", s.Text(), err, gateways.MsgNoModel)
	}

	spec := discordtest.File{Name: "spec.txt", ContentType: "text/plain", Data: []byte("the spec")}
	d.srv.Post(discordtest.Post{Author: owner, Forward: &discordtest.Snapshot{Content: "read this", Files: []discordtest.File{spec}}})
	d.waitText("saved in the workspace as inbox/spec.txt")
	if got := files.get("spec.txt"); !bytes.Equal(got, spec.Data) {
		t.Errorf("saved %q, want the forwarded file", got)
	}

	before := len(d.srv.SentTo(d.srv.DMChannel(owner)))
	sticker := d.srv.Post(discordtest.Post{Author: owner, Stickers: []discordtest.Sticker{{ID: "749054660769218631", Name: "Wave"}}})
	_, err = d.srv.WaitSent(d.ctx, func(s discordtest.Sent) bool { return s.ReplyTo == sticker.ID })
	if err != nil {
		t.Errorf("the sticker got no answer: %v", err)
	}
	if n := len(d.srv.SentTo(d.srv.DMChannel(owner))); n != before+1 {
		t.Errorf("%d messages after the sticker, want one", n-before)
	}
	for _, c := range d.srv.Calls(discordtest.RouteAttachment) {
		if strings.HasSuffix(c.Path, "/bait.txt") {
			t.Errorf("the stranger's forwarded file was fetched: %s", c.Path)
		}
	}
	if files.get("bait.txt") != nil {
		t.Error("the stranger's forwarded file was saved")
	}
}

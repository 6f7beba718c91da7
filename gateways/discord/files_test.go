package discord

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/latchd/latch/gateways"
	"github.com/latchd/latch/gateways/discord/discordtest"
	"github.com/latchd/latch/turn"
)

func TestSendFile(t *testing.T) {
	srv := newFake(t)
	g, _ := started(t, srv)
	in := srv.SendDM(alice, "send me the report")
	if err := g.SendFile(testContext(t), in.ChannelID, turn.File{Name: "out/report.txt", Data: []byte("the report")}, in.ID); err != nil {
		t.Fatal(err)
	}
	sent := srv.SentTo(in.ChannelID)
	if len(sent) != 1 || len(sent[0].Files) != 1 {
		t.Fatalf("sent %+v, want one message with a file", sent)
	}
	f := sent[0].Files[0]
	if f.Name != "report.txt" || string(f.Data) != "the report" || !strings.HasPrefix(f.ContentType, "text/plain") ||
		sent[0].ReplyTo != in.ID || !sent[0].NoPings() {
		t.Errorf("upload = %+v (%+v)", f, sent[0])
	}
}

func TestSendFileLimits(t *testing.T) {
	srv := newFake(t)
	g, _ := started(t, srv, func(c *Config) { c.MaxUpload = 100 })
	ch := srv.DMChannel(alice)
	ctx := testContext(t)
	err := g.SendFile(ctx, ch, turn.File{Name: "big.bin", Data: make([]byte, 101)}, "")
	if !errors.Is(err, ErrFileTooLarge) || !strings.Contains(err.Error(), "over the 0.0 MB upload limit") {
		t.Errorf("SendFile of 101 bytes = %v, want ErrFileTooLarge naming the limit", err)
	}
	if n := srv.Count(discordtest.RouteCreateMessage); n != 0 {
		t.Errorf("%d uploads attempted, want none", n)
	}
	if err := g.SendFile(ctx, ch, turn.File{Name: "empty"}, ""); err == nil {
		t.Error("SendFile of an empty file succeeded")
	}
	// Discord's own limit (a smaller one for the channel) says 413.
	srv.SetMaxUpload(10)
	if err := g.SendFile(ctx, ch, turn.File{Name: "mid.bin", Data: make([]byte, 50)}, ""); !errors.Is(err, ErrFileTooLarge) {
		t.Errorf("SendFile refused by Discord = %v, want ErrFileTooLarge", err)
	}
}

func TestDownload(t *testing.T) {
	srv, g, sink := running(t)
	data := bytes.Repeat([]byte("0123456789"), 100)
	srv.SendDM(alice, "", discordtest.File{Name: "data.bin", ContentType: "application/octet-stream", Data: data})
	a := sink.waitStored(t, 1)[0].Files[0]
	ctx := testContext(t)

	var buf bytes.Buffer
	if err := g.Download(ctx, a, &buf, 1<<20); err != nil || !bytes.Equal(buf.Bytes(), data) {
		t.Fatalf("Download = %v, %d bytes; want the file", err, buf.Len())
	}
	if c := srv.Calls(discordtest.RouteAttachment); len(c) != 1 || c[0].HadAuth {
		t.Errorf("attachment requests = %+v, want one without the bot token", c)
	}
	if err := g.Download(ctx, a, &buf, 999); !errors.Is(err, ErrFileTooLarge) {
		t.Errorf("Download over the announced size = %v, want ErrFileTooLarge", err)
	}
	unknown := a
	unknown.Size = 0 // not announced: the cap applies while reading
	if err := g.Download(ctx, unknown, &buf, 999); !errors.Is(err, ErrFileTooLarge) {
		t.Errorf("Download of an unannounced large file = %v, want ErrFileTooLarge", err)
	}
	for _, bad := range []string{"https://evil.example/attachments/1/2/x", "http://cdn.discordapp.com/attachments/1/2/x", "file:///etc/passwd"} {
		if err := g.Download(ctx, gateways.Attachment{ID: bad}, &buf, 1<<20); err == nil {
			t.Errorf("Download(%s) succeeded, want it refused", bad)
		}
	}
}

// TestSendFileRetries5xx: an upload that meets Discord's 5xx is made
// again, whole (a fresh body per attempt), as a message is; one that keeps
// failing gives up after answerTries, and a 4xx is not tried again.
func TestSendFileRetries5xx(t *testing.T) {
	data := bytes.Repeat([]byte("report "), 100)
	cases := []struct {
		name      string
		faults    []discordtest.Fault
		wantErr   bool
		wantCalls int
	}{
		{"500 once", []discordtest.Fault{{Status: 500}}, false, 2},
		{"503 twice", []discordtest.Fault{{Status: 503, Times: 2}}, false, 3},
		{"500 throughout", []discordtest.Fault{{Status: 500, Times: answerTries}}, true, answerTries},
		{"400", []discordtest.Fault{{Status: 400, Code: 50035, Message: "Invalid Form Body"}}, true, 1},
	}
	srv := newFake(t)
	g, _ := started(t, srv)
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			u := discordtest.User{ID: strconv.Itoa(310000000000000000 + i), Username: "u" + strconv.Itoa(i)}
			ch := srv.DMChannel(u)
			calls := srv.Count(discordtest.RouteCreateMessage)
			srv.Inject(discordtest.RouteCreateMessage, c.faults...)
			err := g.SendFile(testContext(t), ch, turn.File{Name: "report.txt", Data: data}, "")
			if (err != nil) != c.wantErr {
				t.Fatalf("SendFile = %v, want error: %v", err, c.wantErr)
			}
			if n := srv.Count(discordtest.RouteCreateMessage) - calls; n != c.wantCalls {
				t.Errorf("%d upload requests, want %d", n, c.wantCalls)
			}
			sent := srv.SentTo(ch)
			if c.wantErr {
				if len(sent) != 0 {
					t.Errorf("sent %+v after a failed upload", sent)
				}
				return
			}
			if len(sent) != 1 || len(sent[0].Files) != 1 || !bytes.Equal(sent[0].Files[0].Data, data) {
				t.Errorf("sent %+v, want one message with the whole file", sent)
			}
		})
	}
}

// TestDownloadMoreThanAnnounced: a file whose attachment announces less
// than the CDN then serves, without a Content-Length, is cut off once
// more than the limit arrives; one of exactly the limit is whole.
func TestDownloadMoreThanAnnounced(t *testing.T) {
	srv, g, sink := running(t)
	const limit = 1000
	over := bytes.Repeat([]byte("x"), limit+1)
	exact := bytes.Repeat([]byte("y"), limit)
	srv.SendDM(alice, "",
		discordtest.File{Name: "over.bin", Data: over, Announced: 10, Chunked: true},
		discordtest.File{Name: "exact.bin", Data: exact, Announced: 10, Chunked: true})
	files := sink.waitStored(t, 1)[0].Files
	if len(files) != 2 || files[0].Size != 10 || files[1].Size != 10 {
		t.Fatalf("stored files %+v, want two announced at 10 bytes", files)
	}
	ctx := testContext(t)

	var buf bytes.Buffer
	err := g.Download(ctx, files[0], &buf, limit)
	if !errors.Is(err, ErrFileTooLarge) || !strings.Contains(err.Error(), "more than") {
		t.Errorf("Download of %d bytes announced as 10 = %v (%d bytes written), want ErrFileTooLarge once more than %d arrived",
			len(over), err, buf.Len(), limit)
	}
	buf.Reset()
	if err := g.Download(ctx, files[1], &buf, limit); err != nil || !bytes.Equal(buf.Bytes(), exact) {
		t.Errorf("Download of exactly the limit = %v, %d bytes; want the whole file", err, buf.Len())
	}
}

package telegram

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/png"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/latchd/latch/gateways"
	"github.com/latchd/latch/gateways/telegram/telegramtest"
	"github.com/latchd/latch/turn"
)

// pngHeader is enough of a PNG for content sniffing, not for reading.
var pngHeader = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")

func randomBytes(n int) []byte {
	r := rand.New(rand.NewPCG(uint64(n), 7))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// ingest runs g until the update updateID is stored and returns the
// messages stored.
func ingest(t *testing.T, g *Gateway, updateID int) []gateways.Message {
	t.Helper()
	sink := &memSink{}
	stop := run(t, g, sink)
	eventually(t, "the update", func() bool { return sink.storedNext() == strconv.Itoa(updateID+1) })
	_ = stop()
	return sink.storedMsgs()
}

func TestRunTranslatesAttachments(t *testing.T) {
	srv := newFake(t)
	chat := telegramtest.Private(alice)
	doc := srv.AddFile([]byte("%PDF-1.4 report"), "report.pdf")
	small := srv.AddFile(randomBytes(100), "")
	large := srv.AddFile(randomBytes(900), "")
	medium := srv.AddFile(randomBytes(400), "")
	voice := srv.AddFile(randomBytes(50), "")
	song := srv.AddFile(randomBytes(60), "song.mp3")
	srv.SendDocument(chat, alice, doc, "see this")
	srv.Deliver(telegramtest.Incoming{Chat: chat, From: &alice, Photo: []telegramtest.PhotoSize{
		srv.PhotoSizeOf(small, 90, 67), srv.PhotoSizeOf(large, 1280, 960), srv.PhotoSizeOf(medium, 320, 240)}})
	srv.Deliver(telegramtest.Incoming{Chat: chat, From: &alice, Voice: srv.VoiceOf(voice)})
	last := srv.Deliver(telegramtest.Incoming{Chat: chat, From: &alice, Audio: srv.AudioOf(song), Caption: "listen"}).UpdateID
	g, _ := started(t, srv)
	msgs := ingest(t, g, last)
	want := []struct {
		text string
		file gateways.Attachment
	}{
		{"see this", gateways.Attachment{ID: doc, Name: "report.pdf", Size: 15, Kind: "document", MIME: "application/pdf"}},
		{"", gateways.Attachment{ID: large, Size: 900, Kind: "photo", MIME: "image/jpeg"}},
		{"", gateways.Attachment{ID: voice, Size: 50, Kind: "voice", MIME: "audio/ogg", Seconds: 3}},
		{"listen", gateways.Attachment{ID: song, Name: "song.mp3", Size: 60, Kind: "audio", MIME: "audio/mpeg", Seconds: 180}},
	}
	if len(msgs) != len(want) {
		t.Fatalf("ingested %d messages, want %d: %+v", len(msgs), len(want), msgs)
	}
	for i, w := range want {
		m := msgs[i]
		if m.Text != w.text || len(m.Files) != 1 || m.Files[0] != w.file {
			t.Errorf("message %d: text %q files %+v, want %q with %+v", i, m.Text, m.Files, w.text, w.file)
		}
	}
}

func TestDownloadRoundTrip(t *testing.T) {
	srv := newFake(t)
	content := randomBytes(300 << 10)
	id := srv.AddFile(content, "data.bin")
	last := srv.SendDocument(telegramtest.Private(alice), alice, id, "").UpdateID
	g, _ := started(t, srv)
	msgs := ingest(t, g, last)
	if len(msgs) != 1 || len(msgs[0].Files) != 1 {
		t.Fatalf("ingested %+v, want one message with one file", msgs)
	}
	var buf bytes.Buffer
	if err := g.Download(testContext(t), msgs[0].Files[0], &buf, 1<<20); err != nil {
		t.Fatalf("Download: %v", err)
	}
	if !bytes.Equal(buf.Bytes(), content) {
		t.Errorf("downloaded %d bytes that differ from the %d sent", buf.Len(), len(content))
	}
}

func TestDownloadCap(t *testing.T) {
	const max = 1000
	tests := []struct {
		name      string
		size      int   // real size
		announced int64 // -1: the real size
		attSize   int64 // Attachment.Size
		wantCall  bool  // getFile is called
		wantFetch bool  // the file route is requested
		wantErr   bool
	}{
		{name: "fits", size: max, announced: -1, attSize: max, wantCall: true, wantFetch: true},
		{name: "attachment over max", size: 2 * max, announced: -1, attSize: 2 * max, wantErr: true},
		{name: "getFile over max", size: 2 * max, announced: -1, attSize: 0, wantCall: true, wantErr: true},
		{name: "more arrives than announced", size: 5 * max, announced: 10, attSize: 10, wantCall: true, wantFetch: true, wantErr: true},
		{name: "size unknown, too much arrives", size: max + 1, announced: 0, attSize: 0, wantCall: true, wantFetch: true, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newFake(t)
			g, _ := started(t, srv)
			id := srv.AddFile(randomBytes(tt.size), "f.bin")
			if tt.announced >= 0 {
				srv.SetAnnouncedSize(id, tt.announced)
			}
			var buf bytes.Buffer
			err := g.Download(testContext(t), gateways.Attachment{ID: id, Size: tt.attSize, Kind: "document"}, &buf, max)
			if tt.wantErr != (err != nil) || tt.wantErr && !errors.Is(err, ErrFileTooLarge) {
				t.Fatalf("Download = %v, want ErrFileTooLarge: %v", err, tt.wantErr)
			}
			if buf.Len() > max {
				t.Errorf("wrote %d bytes, more than the cap %d", buf.Len(), max)
			}
			if got := srv.Count("getFile") > 0; got != tt.wantCall {
				t.Errorf("getFile called: %v, want %v", got, tt.wantCall)
			}
			if got := srv.Downloads() > 0; got != tt.wantFetch {
				t.Errorf("file fetched: %v, want %v", got, tt.wantFetch)
			}
		})
	}
}

func TestDownloadErrorsHideToken(t *testing.T) {
	srv := newFake(t)
	g, _ := started(t, srv)
	id := srv.AddFile([]byte("x"), "x.txt")
	_, secret, _ := strings.Cut(testToken, ":")
	err := g.Download(testContext(t), gateways.Attachment{ID: "nope"}, &bytes.Buffer{}, 10)
	if err == nil || !strings.Contains(err.Error(), "invalid file_id") {
		t.Errorf("Download of an unknown file = %v, want invalid file_id", err)
	}
	srv.Close()
	err = g.Download(testContext(t), gateways.Attachment{ID: id}, &bytes.Buffer{}, 10)
	if err == nil || strings.Contains(err.Error(), secret) {
		t.Errorf("Download from a closed server = %v, want an error without the token", err)
	}
	// The file route itself fails in the transport.
	err = g.fetchFile(testContext(t), "documents/x.txt", &bytes.Buffer{}, 10, nil)
	if err == nil || strings.Contains(g.scrub(err).Error(), secret) || strings.Contains(err.Error(), secret) {
		t.Errorf("fetchFile = %v, want an error without the token", err)
	}
}

// pngOf is a w×h PNG, which the fake reads the size of as Telegram does.
func pngOf(t *testing.T, w, h int) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewGray(image.Rect(0, 0, w, h))); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestSendFile(t *testing.T) {
	png := pngOf(t, 640, 480)
	tests := []struct {
		name       string
		file       turn.File
		wantMethod string
	}{
		{"document", turn.File{Name: "dir/notes.txt", Data: randomBytes(70 << 10)}, "sendDocument"},
		{"photo", turn.File{Name: "chart.PNG", Data: png}, "sendPhoto"},
		{"not really an image", turn.File{Name: "fake.jpg", Data: []byte("plain text")}, "sendDocument"},
		{"image over 10 MB", turn.File{Name: "huge.png", Data: append(append([]byte{}, pngHeader...), make([]byte, 10<<20)...)}, "sendDocument"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newFake(t)
			replyTo := question(srv)
			g, _ := started(t, srv)
			if err := g.SendFile(testContext(t), "1111", tt.file, replyTo); err != nil {
				t.Fatalf("SendFile: %v", err)
			}
			sent := srv.SentTo(1111)
			if len(sent) != 1 || sent[0].File == nil {
				t.Fatalf("sent %+v, want one file", sent)
			}
			s := sent[0]
			if s.Method != tt.wantMethod || !bytes.Equal(s.File.Data, tt.file.Data) {
				t.Errorf("%s with %d bytes, want %s with the %d bytes given", s.Method, len(s.File.Data), tt.wantMethod, len(tt.file.Data))
			}
			if want := tt.file.Name[strings.LastIndex(tt.file.Name, "/")+1:]; s.File.Name != want {
				t.Errorf("file name %q, want %q", s.File.Name, want)
			}
			if strconv.Itoa(s.ReplyTo) != replyTo {
				t.Errorf("reply_to %d, want %s", s.ReplyTo, replyTo)
			}
		})
	}
}

func TestSendFileLimits(t *testing.T) {
	srv := newFake(t)
	srv.AddChat(telegramtest.Private(alice))
	g, _ := started(t, srv)
	err := g.SendFile(testContext(t), "1111", turn.File{Name: "big.iso", Data: make([]byte, 50<<20+1)}, "")
	if !errors.Is(err, ErrFileTooLarge) || !strings.Contains(err.Error(), "50 MB") {
		t.Errorf("SendFile of 50 MB + 1 = %v, want ErrFileTooLarge naming the 50 MB limit", err)
	}
	if err := g.SendFile(testContext(t), "1111", turn.File{Name: "empty.txt"}, ""); err == nil {
		t.Error("SendFile of an empty file succeeded")
	}
	if n := srv.Count("sendDocument") + srv.Count("sendPhoto"); n != 0 {
		t.Errorf("%d uploads attempted, want none", n)
	}
}

func TestSendFileWaitsOutRateLimit(t *testing.T) {
	srv := newFake(t)
	srv.AddChat(telegramtest.Private(alice))
	g, _ := started(t, srv)
	srv.Inject("sendDocument", telegramtest.Fault{Status: 429, RetryAfter: 1})
	data := randomBytes(1000)
	if err := g.SendFile(testContext(t), "1111", turn.File{Name: "a.bin", Data: data}, ""); err != nil {
		t.Fatalf("SendFile after a 429: %v", err)
	}
	if sent := srv.Sent(); len(sent) != 1 || !bytes.Equal(sent[0].File.Data, data) {
		t.Errorf("sent %+v, want the file once, whole", sent)
	}
}

// TestSendFileRetriesServerErrors: a file the agent sends is uploaded
// reliably, as a chunk of its text is: a passing 5xx, a proxy's error page
// or a dropped connection is tried again (a new upload of the whole file),
// up to maxReliableAttempts; Telegram's verdict on the request (a 4xx) is
// not.
func TestSendFileRetriesServerErrors(t *testing.T) {
	doc := turn.File{Name: "report.bin", Data: randomBytes(5000)}
	photo := turn.File{Name: "chart.png", Data: pngOf(t, 64, 48)}
	tests := []struct {
		name      string
		file      turn.File
		method    string
		fault     telegramtest.Fault
		wantErr   bool
		wantTries int
	}{
		{"502 from the Bot API", doc, "sendDocument", telegramtest.Fault{Status: 502}, false, 2},
		{"a proxy's HTML 502", doc, "sendDocument", telegramtest.Fault{Status: 502, Body: "<html>bad gateway</html>"}, false, 2},
		{"a dropped connection", doc, "sendDocument", telegramtest.Fault{Hangup: true}, false, 2},
		{"503 on a photo", photo, "sendPhoto", telegramtest.Fault{Status: 503}, false, 2},
		{"502 every time", doc, "sendDocument", telegramtest.Fault{Status: 502, Times: -1}, true, maxReliableAttempts},
		{"400 is final", doc, "sendDocument", telegramtest.Fault{Status: 400, Description: "Bad Request: not enough rights to send documents"}, true, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newFake(t)
			srv.AddChat(telegramtest.Private(alice))
			g, _ := started(t, srv)
			srv.Inject(tt.method, tt.fault)
			err := g.SendFile(testContext(t), "1111", tt.file, "")
			if (err != nil) != tt.wantErr {
				t.Fatalf("SendFile = %v, want error: %t", err, tt.wantErr)
			}
			if n := srv.Count(tt.method); n != tt.wantTries {
				t.Errorf("%d %s requests, want %d", n, tt.method, tt.wantTries)
			}
			sent := srv.Sent()
			if tt.wantErr {
				if len(sent) != 0 {
					t.Errorf("sent %+v, want nothing", sent)
				}
				return
			}
			if len(sent) != 1 || sent[0].Method != tt.method || !bytes.Equal(sent[0].File.Data, tt.file.Data) {
				t.Errorf("sent %d messages (first %+v), want the file once, whole, by %s", len(sent), sent, tt.method)
			}
		})
	}
}

// TestSendFilePhotoRefusedAsDocument: an image Telegram will not take as a
// photo — its sides too far apart or too long together — still reaches the
// chat, as a document.
func TestSendFilePhotoRefusedAsDocument(t *testing.T) {
	for _, size := range [][2]int{{2100, 100}, {9990, 600}} {
		t.Run(fmt.Sprintf("%dx%d", size[0], size[1]), func(t *testing.T) {
			srv := newFake(t)
			srv.AddChat(telegramtest.Private(alice))
			g, _ := started(t, srv)
			f := turn.File{Name: "panorama.png", Data: pngOf(t, size[0], size[1])}
			if err := g.SendFile(testContext(t), "1111", f, ""); err != nil {
				t.Fatalf("SendFile: %v", err)
			}
			sent := srv.Sent()
			if srv.Count("sendPhoto") != 1 || len(sent) != 1 || sent[0].Method != "sendDocument" ||
				sent[0].File.Name != "panorama.png" || !bytes.Equal(sent[0].File.Data, f.Data) {
				t.Errorf("%d sendPhoto, sent %+v; want the photo refused, then the file as a document", srv.Count("sendPhoto"), sent)
			}
		})
	}
}

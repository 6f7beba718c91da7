package telegramtest_test

import (
	"bytes"
	"encoding/binary"
	"image"
	"image/gif"
	"image/jpeg"
	"image/png"
	"strings"
	"testing"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/latchd/latch/gateways/telegram/telegramtest"
)

// encoded is a w×h image in format ("png", "jpeg" or "gif").
func encoded(t *testing.T, format string, w, h int) []byte {
	t.Helper()
	img := image.NewGray(image.Rect(0, 0, w, h))
	var b bytes.Buffer
	var err error
	switch format {
	case "png":
		err = png.Encode(&b, img)
	case "jpeg":
		err = jpeg.Encode(&b, img, nil)
	case "gif":
		err = gif.Encode(&b, img, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// webpHeader is the start of a WebP file of w×h in the given chunk
// ("VP8 ", "VP8L" or "VP8X"): enough for a reader of its size.
func webpHeader(chunk string, w, h int) []byte {
	b := make([]byte, 30)
	copy(b, "RIFF")
	binary.LittleEndian.PutUint32(b[4:], 22)
	copy(b[8:], "WEBP")
	copy(b[12:], chunk)
	switch chunk {
	case "VP8X":
		w, h = w-1, h-1
		b[24], b[25], b[26] = byte(w), byte(w>>8), byte(w>>16)
		b[27], b[28], b[29] = byte(h), byte(h>>8), byte(h>>16)
	case "VP8L":
		b[20] = 0x2f
		binary.LittleEndian.PutUint32(b[21:], uint32(w-1)|uint32(h-1)<<14)
	case "VP8 ":
		copy(b[23:], []byte{0x9d, 0x01, 0x2a})
		binary.LittleEndian.PutUint16(b[26:], uint16(w))
		binary.LittleEndian.PutUint16(b[28:], uint16(h))
	}
	return b
}

// TestSendPhotoRules: sendPhoto takes what Telegram takes — an image it can
// read, at most 10 MB, sides adding up to at most 10,000 and at most 20
// times apart — and refuses the rest with Telegram's words.
func TestSendPhotoRules(t *testing.T) {
	tests := []struct {
		name    string
		data    []byte
		wantErr string // "" = sent
		w, h    int    // of the photo sent
	}{
		{"png", encoded(t, "png", 640, 480), "", 640, 480},
		{"jpeg", encoded(t, "jpeg", 300, 200), "", 300, 200},
		{"gif", encoded(t, "gif", 20, 20), "", 20, 20},
		{"sides add up to 10000", encoded(t, "png", 5000, 5000), "", 5000, 5000},
		{"ratio 20", encoded(t, "png", 400, 20), "", 400, 20},
		{"webp lossy", webpHeader("VP8 ", 1000, 800), "", 1000, 800},
		{"webp lossless", webpHeader("VP8L", 16000, 1), "PHOTO_INVALID_DIMENSIONS", 0, 0},
		{"webp extended", webpHeader("VP8X", 9000, 500), "", 9000, 500},
		{"sides add up to 10001", encoded(t, "png", 10000, 1), "PHOTO_INVALID_DIMENSIONS", 0, 0},
		{"ratio 21", encoded(t, "png", 21, 1), "PHOTO_INVALID_DIMENSIONS", 0, 0},
		{"tall ratio 21", encoded(t, "png", 10, 210), "PHOTO_INVALID_DIMENSIONS", 0, 0},
		{"a PNG signature on noise", append([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"), make([]byte, 200)...), "IMAGE_PROCESS_FAILED", 0, 0},
		{"text", []byte("not an image"), "IMAGE_PROCESS_FAILED", 0, 0},
		{"over 10 MB", append(encoded(t, "png", 10, 10), make([]byte, telegramtest.MaxPhotoUpload)...),
			"is too big for a photo; the maximum size is 10485760 bytes", 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t)
			srv.AddChat(telegramtest.Private(alice))
			bot := newBot(t, srv)
			m, err := bot.Send(tgbotapi.NewPhoto(1111, tgbotapi.FileBytes{Name: "p.img", Bytes: tt.data}))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.HasPrefix(err.Error(), "Bad Request: ") {
					t.Fatalf("sendPhoto = %v, want Bad Request: …%s", err, tt.wantErr)
				}
				if n := len(srv.Sent()); n != 0 {
					t.Errorf("%d messages recorded for a refused photo", n)
				}
				return
			}
			if err != nil {
				t.Fatalf("sendPhoto: %v", err)
			}
			if len(m.Photo) != 1 || m.Photo[0].Width != tt.w || m.Photo[0].Height != tt.h {
				t.Errorf("photo sizes %+v, want one of %d×%d", m.Photo, tt.w, tt.h)
			}
		})
	}
}

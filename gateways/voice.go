package gateways

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/latchd/latch/logkey"
	"github.com/latchd/latch/store"
)

// Transcriber turns audio into text; package transcribe implements it. Its
// errors are written for the owner.
type Transcriber interface {
	Transcribe(ctx context.Context, name, mime string, r io.Reader) (string, error)
}

// Transcription is how the Hub transcribes voice notes and audio files:
// one larger than MaxBytes or, as the platform announces it, longer than
// MaxSeconds is saved but not sent.
type Transcription struct {
	Transcriber
	MaxBytes   int64
	MaxSeconds int
}

// audio reports whether f is something to transcribe.
func audio(f Attachment) bool {
	return f.Kind == "voice" || f.Kind == "audio" || strings.HasPrefix(strings.ToLower(f.MIME), "audio/")
}

// heard is what a transcription gave: the note for the agent, and the
// transcript to echo to the owner ("" for none).
type heard struct {
	note, transcript string
}

// listen returns a writer that keeps a copy of an audio file being saved,
// for transcribe, or nil when f is not to be transcribed (no transcriber,
// not audio, over a cap: too tells why).
func (h *Hub) listen(f Attachment) (copy *capped, too string) {
	t := h.cfg.Transcribe
	switch {
	case t == nil || t.Transcriber == nil || !audio(f):
		return nil, ""
	case t.MaxBytes > 0 && f.Size > t.MaxBytes:
		return nil, tooLarge(t.MaxBytes)
	case t.MaxSeconds > 0 && f.Seconds > t.MaxSeconds:
		return nil, fmt.Sprintf("it is longer than the %s that are transcribed", time.Duration(t.MaxSeconds)*time.Second)
	}
	return &capped{max: t.MaxBytes}, ""
}

// transcribe turns the copy of a saved audio file into the agent's note.
// The transcript is the owner's words but never their command: it goes to
// the agent as text, like a forwarded message, whatever it starts with.
func (h *Hub) transcribe(ctx context.Context, e store.Entry, f Attachment, saved string, copy *capped, too string) heard {
	what := kindName(f)
	switch {
	case too != "":
		return heard{note: fmt.Sprintf("[The owner sent a %s, saved in the workspace as %s; it was not transcribed: %s.]", what, saved, too)}
	case copy.over:
		return heard{note: fmt.Sprintf("[The owner sent a %s, saved in the workspace as %s; it was not transcribed: %s.]", what, saved, tooLarge(copy.max))}
	}
	text, err := h.cfg.Transcribe.Transcribe(ctx, cmpName(f), f.MIME, bytes.NewReader(copy.buf.Bytes()))
	switch {
	case err != nil:
		h.log.Warn("transcribing a voice note failed", logkey.Gateway, e.Gateway, logkey.Err, err)
		return heard{note: fmt.Sprintf("[The owner sent a %s, saved in the workspace as %s; transcribing it failed: %v]", what, saved, err)}
	case text == "":
		return heard{note: fmt.Sprintf("[The owner sent a %s, saved in the workspace as %s; its transcript is empty.]", what, saved)}
	}
	return heard{
		note:       fmt.Sprintf("[The owner sent a %s, saved in the workspace as %s. Its machine transcript, which may have misheard words:]\n%s", what, saved, text),
		transcript: text,
	}
}

func tooLarge(max int64) string {
	if max >= 1<<20 {
		return fmt.Sprintf("it is larger than the %d MB that are transcribed", max>>20)
	}
	return fmt.Sprintf("it is larger than the %d bytes that are transcribed", max)
}

func kindName(f Attachment) string {
	if f.Kind == "voice" {
		return "voice note"
	}
	return "audio file"
}

// echo is the transcript as the owner is shown it, quoted, so that a
// mishearing shows before the agent acts on it.
func echo(transcripts []string) string {
	var b strings.Builder
	b.WriteString("🎙 Heard:")
	for _, t := range transcripts {
		for line := range strings.SplitSeq(t, "\n") {
			b.WriteString("\n> " + line)
		}
	}
	return b.String()
}

// capped keeps up to max bytes written to it and notes whether more came.
type capped struct {
	buf  bytes.Buffer
	max  int64
	over bool
}

func (c *capped) Write(p []byte) (int, error) {
	if !c.over && (c.max <= 0 || int64(c.buf.Len()+len(p)) <= c.max) {
		c.buf.Write(p)
	} else if !c.over {
		c.over = true
		c.buf = bytes.Buffer{}
	}
	return len(p), nil
}

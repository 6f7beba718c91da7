package daemon

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/latchd/latch/agent/provider/anthropic/anthropictest"
	"github.com/latchd/latch/config"
	"github.com/latchd/latch/gateways/telegram/telegramtest"
	"github.com/latchd/latch/transcribe/transcribetest"
)

const transcribeKey = "sk-e2e-TRANSCRIBEkeyDoNotLeak"

// withTranscriber points [transcribe] at a fake endpoint, on top of the
// model withModel set up.
func withTranscriber(e *env, text string) *transcribetest.Server {
	fake := transcribetest.New(transcribeKey, text)
	e.t.Cleanup(fake.Close)
	prev := e.tweak
	e.tweak = func(c *config.Config) {
		if prev != nil {
			prev(c)
		}
		c.Transcribe.BaseURL, c.Transcribe.APIKey = fake.URL(), transcribeKey
	}
	return fake
}

// TestE2EVoiceNoteIsTranscribed: a Telegram voice note goes to the
// endpoint as it is (OGG/Opus, the real multipart form), the owner sees
// the transcript quoted, and the agent gets it with the saved file.
func TestE2EVoiceNoteIsTranscribed(t *testing.T) {
	e := newEnv(t)
	model := withModel(e)
	fake := withTranscriber(e, "Remind me to water the plants.")
	e.start()
	e.pair()
	model.Script(anthropictest.Text("Noted: the plants."))
	voice := []byte("OggS\x00\x02\x00\x00opus-voice-note")
	e.tg.Deliver(telegramtest.Incoming{Chat: telegramtest.Private(owner), From: &owner, Voice: e.tg.VoiceOf(e.tg.AddFile(voice, "voice/file_1.oga"))})
	e.waitReply(owner.ID, "🎙 Heard:\n> Remind me to water the plants.")
	e.waitReply(owner.ID, "Noted: the plants.")
	reqs := fake.Requests()
	if len(reqs) != 1 || !bytes.Equal(reqs[0].Data, voice) || reqs[0].FileName != "voice.ogg" || reqs[0].Model != "whisper-1" {
		t.Fatalf("transcription requests: %+v", reqs)
	}
	body := string(model.Requests()[0].Body)
	if !strings.Contains(body, "Remind me to water the plants.") || !strings.Contains(body, "voice note, saved in the workspace as inbox/") {
		t.Fatalf("the agent was not given the transcript: %s", body)
	}
}

// TestE2ETranscriptIsNeverACommand: a transcript that reads like a
// !command or a /command goes to the agent as words; nothing runs.
func TestE2ETranscriptIsNeverACommand(t *testing.T) {
	e := newEnv(t)
	model := withModel(e)
	marker := filepath.Join(e.home, "workspace", "pwned")
	withTranscriber(e, "!touch "+marker)
	e.start()
	e.pair()
	model.Script(anthropictest.Text("That sounded like a command; I did not run it."))
	e.tg.Deliver(telegramtest.Incoming{Chat: telegramtest.Private(owner), From: &owner, Voice: e.tg.VoiceOf(e.tg.AddFile([]byte("OggS"), "voice/file_2.oga"))})
	e.waitReply(owner.ID, "I did not run it.")
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the transcript ran as a command")
	}
	if body := string(model.Requests()[0].Body); !strings.Contains(body, "!touch") {
		t.Fatalf("the agent did not get the transcript: %s", body)
	}
}

// TestE2EVoiceWithoutTranscriber: with no [transcribe] the note is saved
// and the agent told where, as before; nothing is sent anywhere.
func TestE2EVoiceWithoutTranscriber(t *testing.T) {
	e := newEnv(t)
	model := withModel(e)
	e.start()
	e.pair()
	model.Script(anthropictest.Text("Got a voice note."))
	e.tg.Deliver(telegramtest.Incoming{Chat: telegramtest.Private(owner), From: &owner, Voice: e.tg.VoiceOf(e.tg.AddFile([]byte("OggS"), "voice/file_3.oga"))})
	e.waitReply(owner.ID, "Got a voice note.")
	if body := string(model.Requests()[0].Body); !strings.Contains(body, "[The owner sent a voice, saved in the workspace as inbox/") {
		t.Fatalf("the agent's request: %s", body)
	}
	if n := e.repliesTo(owner.ID, "🎙"); n != 0 {
		t.Errorf("%d transcript echoes without a transcriber", n)
	}
}

// TestE2EVoiceOverTheCaps: a note longer than max_duration (as Telegram
// announces it), or larger than max_mb, is saved but never sent to the
// endpoint, and the agent is told why.
func TestE2EVoiceOverTheCaps(t *testing.T) {
	for _, tt := range []struct {
		name string
		cap  func(*config.Config)
		why  string
	}{
		{"too long", func(c *config.Config) { c.Transcribe.MaxDuration = 2 * time.Second }, "it is longer than the 2s that are transcribed"},
		{"too large", func(c *config.Config) { c.Transcribe.MaxBytes = 3 }, "it is larger than the 3 bytes that are transcribed"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			model := withModel(e)
			fake := withTranscriber(e, "never")
			prev := e.tweak
			e.tweak = func(c *config.Config) { prev(c); tt.cap(c) }
			e.start()
			e.pair()
			model.Script(anthropictest.Text("ok"))
			// VoiceOf announces 3 s.
			e.tg.Deliver(telegramtest.Incoming{Chat: telegramtest.Private(owner), From: &owner, Voice: e.tg.VoiceOf(e.tg.AddFile([]byte("OggS-opus"), "voice/file_4.oga"))})
			e.waitReply(owner.ID, "ok")
			if n := len(fake.Requests()); n != 0 {
				t.Errorf("%d transcription requests", n)
			}
			if body := string(model.Requests()[0].Body); !strings.Contains(body, tt.why) {
				t.Errorf("the agent was not told %q: %s", tt.why, body)
			}
		})
	}
}

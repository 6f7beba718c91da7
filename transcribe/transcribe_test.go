package transcribe_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/latchd/latch/transcribe"
	"github.com/latchd/latch/transcribe/transcribetest"
)

const key = "sk-test-TRANSCRIBEkey"

func TestTranscribeSendsTheRealForm(t *testing.T) {
	fake := transcribetest.New(key, "  Buy milk and call Sam.  ")
	defer fake.Close()
	tr := transcribe.New(transcribe.Config{BaseURL: fake.URL() + "/", Model: "whisper-1", APIKey: key, Timeout: 10 * time.Second})
	audio := []byte("OggS\x00\x02fake-opus-bytes")
	got, err := tr.Transcribe(context.Background(), "voice.ogg", "audio/ogg", bytes.NewReader(audio))
	if err != nil || got != "Buy milk and call Sam." {
		t.Fatalf("Transcribe = %q, %v", got, err)
	}
	reqs := fake.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	r := reqs[0]
	if r.FileName != "voice.ogg" || r.PartType != "audio/ogg" || !bytes.Equal(r.Data, audio) || r.Model != "whisper-1" || r.Format != "json" {
		t.Errorf("request = %+v", r)
	}
	if !strings.HasPrefix(r.ContentType, "multipart/form-data; boundary=") {
		t.Errorf("content type %q", r.ContentType)
	}
}

func TestTranscribeErrorsAreForTheOwner(t *testing.T) {
	fake := transcribetest.New(key, "")
	defer fake.Close()
	wrong := transcribe.New(transcribe.Config{BaseURL: fake.URL(), Model: "whisper-1", APIKey: "sk-wrong-KEYvalue", Timeout: 10 * time.Second})
	_, err := wrong.Transcribe(context.Background(), "a.ogg", "", strings.NewReader("x"))
	if !errors.Is(err, transcribe.ErrService) || !strings.Contains(err.Error(), "401, the API key was refused") || strings.Contains(err.Error(), "sk-") {
		t.Errorf("wrong key: %v", err)
	}
	fake.Close()
	_, err = wrong.Transcribe(context.Background(), "a.ogg", "", strings.NewReader("x"))
	if !errors.Is(err, transcribe.ErrService) || strings.Contains(err.Error(), "127.0.0.1") {
		t.Errorf("unreachable: %v", err)
	}
}

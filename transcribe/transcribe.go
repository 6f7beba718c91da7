// Package transcribe turns voice notes and audio files into text through
// any OpenAI-compatible /audio/transcriptions endpoint (OpenAI's Whisper,
// Groq, faster-whisper-server, a whisper.cpp server), using go-openai's
// client, which sends the multipart form those servers take: a "file"
// part named after the file, with its content type, and a "model" field.
//
// Files go as they are; nothing is converted (no ffmpeg). What each
// backend takes: OpenAI and Groq flac, mp3, mp4, mpeg, mpga, m4a, ogg
// (Telegram's OGG/Opus voice notes), wav and webm; faster-whisper-server
// whatever its decoder (PyAV) reads, OGG/Opus included; a whisper.cpp
// server WAV only unless started with --convert (which needs ffmpeg on
// that machine). A backend's refusal reaches the chat as its message.
package transcribe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// Config wires a Transcriber.
type Config struct {
	// BaseURL is the API root, up to and with /v1.
	BaseURL string
	Model   string
	// APIKey is sent as a bearer token; empty sends none.
	APIKey  string
	Timeout time.Duration
	// HTTPClient is for tests; nil makes one with Timeout.
	HTTPClient *http.Client
}

// Transcriber sends audio to the endpoint.
type Transcriber struct {
	client *openai.Client
	model  string
}

// New returns a Transcriber for cfg.
func New(cfg Config) *Transcriber {
	c := openai.DefaultConfig(cfg.APIKey)
	c.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: cfg.Timeout}
	}
	c.HTTPClient = hc
	return &Transcriber{client: openai.NewClientWithConfig(c), model: cfg.Model}
}

// ErrService is a failure of the transcription service (wrapped with what
// it said).
var ErrService = errors.New("the transcription service failed")

// Transcribe returns what is said in the audio read from r; name gives the
// file's name (its extension tells the service the format) and mime its
// type, when known. The error is written for the owner: it never holds
// the key or the endpoint's address.
func (t *Transcriber) Transcribe(ctx context.Context, name, mime string, r io.Reader) (string, error) {
	res, err := t.client.CreateTranscription(ctx, openai.AudioRequest{
		Model: t.model, FilePath: name, Reader: typed{r, mime}, Format: openai.AudioResponseFormatJSON,
	})
	if err != nil {
		return "", describe(ctx, err)
	}
	return strings.TrimSpace(res.Text), nil
}

// typed gives go-openai the part's content type.
type typed struct {
	io.Reader
	mime string
}

func (t typed) ContentType() string { return t.mime }

func describe(ctx context.Context, err error) error {
	var api *openai.APIError
	var req *openai.RequestError
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("%w: stopped", ErrService)
	case errors.As(err, &api) && (api.HTTPStatusCode == http.StatusUnauthorized || api.HTTPStatusCode == http.StatusForbidden):
		// OpenAI's message repeats part of the key.
		return fmt.Errorf("%w: %d, the API key was refused (transcribe.api_key)", ErrService, api.HTTPStatusCode)
	case errors.As(err, &api):
		return fmt.Errorf("%w: %d %s", ErrService, api.HTTPStatusCode, clip(api.Message, 200))
	case errors.As(err, &req):
		return fmt.Errorf("%w: it answered %d", ErrService, req.HTTPStatusCode)
	}
	// A transport error names the URL; the endpoint stays out of chats.
	return fmt.Errorf("%w: it could not be reached", ErrService)
}

func clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

package daemon

import (
	"github.com/latchd/latch/gateways"
	"github.com/latchd/latch/transcribe"
)

// transcription is the Hub's transcriber from [transcribe]; nil when no
// endpoint is configured (voice notes are then only saved).
func (d *Daemon) transcription() *gateways.Transcription {
	t := d.Config.Transcribe
	if !t.Enabled() {
		return nil
	}
	return &gateways.Transcription{
		Transcriber: transcribe.New(transcribe.Config{BaseURL: t.BaseURL, Model: t.Model, APIKey: t.APIKey, Timeout: t.Timeout}),
		MaxBytes:    t.MaxBytes, MaxSeconds: int(t.MaxDuration.Seconds()),
	}
}

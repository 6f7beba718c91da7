package openai

import (
	"testing"

	"github.com/latchd/latch/agent/provider"
)

// BenchmarkEncode encodes the request of a session of 1,000 short
// messages, which every call of such a session sends whole.
func BenchmarkEncode(b *testing.B) {
	req := provider.Request{System: "You are latch."}
	for range 500 {
		req.Messages = append(req.Messages,
			provider.Message{Role: provider.RoleUser, Content: []provider.Block{{Type: provider.BlockText, Text: "what time is it?"}}},
			provider.Message{Role: provider.RoleAssistant, Content: []provider.Block{{Type: provider.BlockText, Text: "pong from the instant fake model"}}})
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := encode(req, "m"); err != nil {
			b.Fatal(err)
		}
	}
}

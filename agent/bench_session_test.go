package agent

import (
	"context"
	"testing"

	"github.com/latchd/latch/agent/provider"
	"github.com/latchd/latch/agent/provider/anthropic/anthropictest"
	"github.com/latchd/latch/store"
)

// BenchmarkTurn is one plain turn (instant fake model) on a session of 10
// and of 1,000 short messages (what the bench's 1,000 quiet turns reach).
func BenchmarkTurn(b *testing.B) {
	for _, n := range []int{10, 1000} {
		b.Run(map[int]string{10: "short", 1000: "long"}[n], func(b *testing.B) {
			f := newFixture(b, nil)
			var msgs []provider.Message
			for range n / 2 {
				msgs = append(msgs, userMsg("what time is it?"), assistantMsg("pong from the instant fake model"))
			}
			s, _ := f.agent.load(chat)
			s.Messages = append(s.Messages, msgs...)
			if err := f.agent.save(chat, s); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				f.fake.Script(anthropictest.Text("pong"))
				if err := f.agent.TurnWith(context.Background(), chat, "ping", &recorder{}, Hooks{Started: func(*store.Tx) error { return nil }}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkLoad loads a session of 1,000 short messages that this process
// saved last (the common case: its tail is kept in memory).
func BenchmarkLoad(b *testing.B) {
	f := newFixture(b, nil)
	s, _ := f.agent.load(chat)
	for range 500 {
		s.Messages = append(s.Messages, userMsg("what time is it?"), assistantMsg("pong from the instant fake model"))
	}
	if err := f.agent.save(chat, s); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := f.agent.load(chat); err != nil {
			b.Fatal(err)
		}
	}
}

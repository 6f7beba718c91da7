package gateways

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/latchd/latch/pairing"
	"github.com/latchd/latch/store"
)

// signalGateway reports "typing…" and replies on channels and nothing else.
type signalGateway struct {
	typing, sent chan struct{}
}

func (g *signalGateway) Name() string                          { return "telegram" }
func (g *signalGateway) Start(context.Context) error           { return nil }
func (g *signalGateway) Run(ctx context.Context, _ Sink) error { <-ctx.Done(); return nil }
func (g *signalGateway) Info() Info                            { return Info{Connected: true} }
func (g *signalGateway) Typing(context.Context, string) {
	select { // Ingest asks, then the job: the first one counts
	case g.typing <- struct{}{}:
	default:
	}
}
func (g *signalGateway) Send(context.Context, string, Reply) (string, error) {
	g.sent <- struct{}{}
	return "1", nil
}

// BenchmarkCommandToTyping measures the Hub's own part of a `!command`'s
// first response: one ingest until the gateway is asked for "typing…"
// (Ingest asks while its transaction commits), then the rest of the job
// until the reply. The store
// lives where LATCH_BENCH_DIR says (default: the test's temporary
// directory), so disk syncs can be included or left out.
func BenchmarkCommandToTyping(b *testing.B) {
	dir := os.Getenv("LATCH_BENCH_DIR")
	if dir == "" {
		dir = b.TempDir()
	} else {
		var err error
		if dir, err = os.MkdirTemp(dir, "hubbench"); err != nil {
			b.Fatal(err)
		}
		defer os.RemoveAll(dir)
	}
	db, err := store.Open(filepath.Join(dir, "latch.db"), store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	p, _ := pairing.New(bytes.Repeat([]byte{1}, pairing.KeyLen))
	g := &signalGateway{typing: make(chan struct{}, 1), sent: make(chan struct{}, 1)}
	h := NewHub(Config{Store: db, Pairer: p, Gateways: []Gateway{g},
		Shell: func(context.Context, string) string { return "exit 0" }})
	var code string
	db.Update(func(tx *store.Tx) (err error) { code, _, err = p.Mint(tx, "telegram", 0); return err })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { h.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	if err := h.Ingest(ctx, "telegram", "0", []Message{private("100", "/pair "+code)}); err != nil {
		b.Fatal(err)
	}
	<-g.sent
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		select { // the job's own request, after the last iteration's
		case <-g.typing:
		default:
		}
		if err := h.Ingest(ctx, "telegram", strconv.Itoa(i+1), []Message{private("100", "!true")}); err != nil {
			b.Fatal(err)
		}
		<-g.typing
		<-g.sent
	}
}

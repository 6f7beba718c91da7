package typing

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

func TestShowOncePerFreshIndicator(t *testing.T) {
	g := New(time.Hour)
	var sent atomic.Int32
	send := func(context.Context) { sent.Add(1) }
	g.Show(t.Context(), "1", send)
	g.Show(t.Context(), "1", send)
	if n := sent.Load(); n != 1 {
		t.Fatalf("%d requests for a fresh indicator, want 1", n)
	}
	g.Show(t.Context(), "2", send)
	if n := sent.Load(); n != 2 {
		t.Fatalf("another chat's indicator was not sent: %d requests, want 2", n)
	}
	g.Posted("1")
	g.Show(t.Context(), "1", send)
	if n := sent.Load(); n != 3 {
		t.Fatalf("after a post the indicator was not sent again: %d requests, want 3", n)
	}
}

func TestShowAgainOnceStale(t *testing.T) {
	g := New(20 * time.Millisecond)
	var sent atomic.Int32
	send := func(context.Context) { sent.Add(1) }
	g.Show(t.Context(), "1", send)
	time.Sleep(30 * time.Millisecond)
	g.Show(t.Context(), "1", send)
	if n := sent.Load(); n != 2 {
		t.Fatalf("%d requests, want a renewal once the indicator is stale", n)
	}
}

// A second Show returns only once the first request has ended, so a post
// made after it cannot overtake the indicator.
func TestShowWaitsForTheRequestInFlight(t *testing.T) {
	g := New(time.Hour)
	release, started := make(chan struct{}), make(chan struct{})
	go g.Show(t.Context(), "1", func(context.Context) { close(started); <-release })
	<-started
	returned := make(chan struct{})
	go func() {
		g.Show(t.Context(), "1", func(context.Context) { t.Error("a second request was sent") })
		close(returned)
	}()
	select {
	case <-returned:
		t.Fatal("the second Show returned while the first request was in flight")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	<-returned

	// A caller whose context ends does not wait for it.
	block := make(chan struct{})
	defer close(block)
	g.Posted("1")
	started = make(chan struct{})
	go g.Show(t.Context(), "1", func(context.Context) { close(started); <-block })
	<-started
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	g.Show(ctx, "1", func(context.Context) { t.Error("a second request was sent") })
}

func TestPruneForgetsStaleChats(t *testing.T) {
	g := New(time.Millisecond)
	for i := range 200 {
		g.Show(t.Context(), fmt.Sprint(i), func(context.Context) {})
		time.Sleep(20 * time.Microsecond)
	}
	time.Sleep(2 * time.Millisecond)
	g.Show(t.Context(), "last", func(context.Context) {})
	g.mu.Lock()
	n := len(g.chats)
	g.mu.Unlock()
	if n > 64 {
		t.Errorf("%d chats remembered, want stale ones forgotten", n)
	}
}

// Package faketest holds what the adapters' fake platform servers
// (telegramtest, discordtest) share and that has nothing of a platform in
// it: a loopback listener, the queue of injected faults, the ways a fault
// misbehaves on the wire, and the "state changed" broadcast their Wait
// methods are built on.
package faketest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"
)

// Loopback starts h on a port of its own on 127.0.0.1. name prefixes the
// panic when no port can be had.
func Loopback(name string, h http.Handler) *httptest.Server {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(fmt.Sprintf("%s: listen on loopback: %v", name, err))
	}
	srv := httptest.NewUnstartedServer(h)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	return srv
}

// Faults queues injected faults by route or method. Each fault applies to
// times requests: 0 or 1 once, n > 1 n times, negative every request until
// Clear. The zero value is empty; the server's lock guards it.
type Faults[F any] struct {
	queues map[string][]queued[F]
}

type queued[F any] struct {
	fault F
	times int
}

// Add queues f for key.
func (q *Faults[F]) Add(key string, f F, times int) {
	if q.queues == nil {
		q.queues = map[string][]queued[F]{}
	}
	q.queues[key] = append(q.queues[key], queued[F]{f, times})
}

// Clear drops the faults still queued for key.
func (q *Faults[F]) Clear(key string) { delete(q.queues, key) }

// Take returns the fault for the next request to key, if any.
func (q *Faults[F]) Take(key string) (F, bool) {
	list := q.queues[key]
	if len(list) == 0 {
		var none F
		return none, false
	}
	f := list[0]
	switch {
	case f.times < 0:
	case f.times > 1:
		list[0].times--
	default:
		list = list[1:]
	}
	if len(list) == 0 {
		delete(q.queues, key)
	} else {
		q.queues[key] = list
	}
	return f.fault, true
}

// Hold holds a request for d before its fault (or its answer) goes on. It
// reports false when the client gave up meanwhile (nothing is left to
// answer); the server closing (done) ends the hold early.
func Hold(r *http.Request, done <-chan struct{}, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.Context().Done():
		return false
	case <-done:
	}
	return true
}

// Hangup closes the request's connection without an answer. A connection
// that cannot be taken over is aborted by net/http instead.
func Hangup(w http.ResponseWriter) {
	if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
		_ = conn.Close()
		return
	}
	panic(http.ErrAbortHandler) // closes the connection without a response
}

// Signal tells waiters that a server's state changed. The zero value is
// ready to use. A server calls Notify under its own lock, so that a waiter
// that reads its state and C under that lock misses no change.
type Signal struct {
	mu sync.Mutex
	ch chan struct{}
}

// C returns a channel that is closed at the next Notify.
func (s *Signal) C() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	return s.ch
}

// Notify wakes everything waiting on a channel from C.
func (s *Signal) Notify() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch != nil {
		close(s.ch)
	}
	s.ch = make(chan struct{})
}

// Wait waits until cond returns true. cond is evaluated now and after
// every Notify, so it may call the server's methods. Wait fails with ctx's
// error when ctx ends, and with closed once done is closed and cond, looked
// at once more, is still false.
func (s *Signal) Wait(ctx context.Context, done <-chan struct{}, closed error, cond func() bool) error {
	for {
		changed := s.C()
		if cond() {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		case <-done:
			if cond() {
				return nil
			}
			return closed
		}
	}
}

// First waits, with wait (a server's Wait), until one of the items list
// returns matches, and returns the first that does.
func First[T any](ctx context.Context, wait func(context.Context, func() bool) error, list func() []T, match func(T) bool) (T, error) {
	var found T
	err := wait(ctx, func() bool {
		for _, m := range list() {
			if match(m) {
				found = m
				return true
			}
		}
		return false
	})
	return found, err
}

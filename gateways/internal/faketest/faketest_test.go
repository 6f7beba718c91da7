package faketest

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestFaults(t *testing.T) {
	var q Faults[string]
	if _, ok := q.Take("a"); ok {
		t.Fatal("the zero queue had a fault")
	}
	q.Add("a", "once", 0)
	q.Add("a", "twice", 2)
	q.Add("b", "always", -1)
	var got []string
	for range 4 {
		f, ok := q.Take("a")
		if !ok {
			f = "-"
		}
		got = append(got, f)
	}
	if want := []string{"once", "twice", "twice", "-"}; !slices.Equal(got, want) {
		t.Errorf("faults taken %q, want %q", got, want)
	}
	for range 3 {
		if f, ok := q.Take("b"); !ok || f != "always" {
			t.Fatalf("Take(b) = %q, %v; want the standing fault", f, ok)
		}
	}
	q.Clear("b")
	if _, ok := q.Take("b"); ok {
		t.Error("a fault left after Clear")
	}
}

func TestSignalWait(t *testing.T) {
	var s Signal
	done := make(chan struct{})
	errClosed := errors.New("closed")
	var mu sync.Mutex
	n := 0
	cond := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return n >= 3
	}
	errc := make(chan error, 1)
	go func() { errc <- s.Wait(t.Context(), done, errClosed, cond) }()
	for range 3 {
		mu.Lock()
		n++
		mu.Unlock()
		s.Notify()
	}
	if err := <-errc; err != nil {
		t.Errorf("Wait = %v, want the condition met", err)
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := s.Wait(ctx, done, errClosed, func() bool { return false }); !errors.Is(err, context.Canceled) {
		t.Errorf("Wait with an ended context = %v", err)
	}
	close(done)
	if err := s.Wait(t.Context(), done, errClosed, func() bool { return false }); err != errClosed {
		t.Errorf("Wait on a closed server = %v, want %v", err, errClosed)
	}
	if err := s.Wait(t.Context(), done, errClosed, func() bool { return true }); err != nil {
		t.Errorf("Wait on a closed server with the condition met = %v", err)
	}
}

func TestFirst(t *testing.T) {
	var s Signal
	var mu sync.Mutex
	var items []int
	list := func() []int {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(items)
	}
	wait := func(ctx context.Context, cond func() bool) error { return s.Wait(ctx, nil, nil, cond) }
	go func() {
		for i := 1; i <= 5; i++ {
			mu.Lock()
			items = append(items, i)
			mu.Unlock()
			s.Notify()
		}
	}()
	got, err := First(t.Context(), wait, list, func(i int) bool { return i%2 == 0 })
	if err != nil || got != 2 {
		t.Errorf("First = %d, %v; want the first even item, 2", got, err)
	}
}

func TestHoldAndHangup(t *testing.T) {
	done := make(chan struct{})
	held := make(chan bool, 1)
	srv := Loopback("faketest", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/hold":
			held <- Hold(r, done, time.Hour)
		case "/hangup":
			Hangup(w)
		default:
			_, _ = io.WriteString(w, "ok")
		}
	}))
	defer srv.Close()
	if !strings.HasPrefix(srv.URL, "http://127.0.0.1:") {
		t.Errorf("server at %s, want 127.0.0.1", srv.URL)
	}
	if _, err := http.Get(srv.URL + "/hangup"); err == nil {
		t.Error("a hung-up request got an answer")
	}

	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/hold", nil)
	if _, err := http.DefaultClient.Do(req); err == nil {
		t.Error("a request held for an hour was answered")
	}
	if ok := <-held; ok {
		t.Error("Hold reported true for a client that gave up")
	}

	close(done)
	resp, err := http.Get(srv.URL + "/hold")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if ok := <-held; !ok {
		t.Error("Hold ended by the server closing reported false")
	}
}

package fakeapi

import (
	"io"
	"net/http"
	"time"
)

// Event is one event of a stream, as written.
type Event struct {
	Text    string // the bytes of the event, up to and including its blank line
	Counted bool   // a piece of content: what Halt.After and Pause.After count
}

// Stream is a scripted event stream, rendered in a protocol's words.
type Stream struct {
	Header    http.Header // headers of the response, beside Content-Type and Cache-Control
	Events    []Event     // the whole stream, as it goes when nothing interrupts it
	KeepAlive string      // what a Pause sends every 100ms
	Error     string      // what a Halt with HaltError sends
	// Pieces writes the stream in writes of these many bytes, taken in
	// turn and flushed one by one, so that lines and events arrive split
	// anywhere. Empty: one write per event.
	Pieces []int
	Halt   Halt
	Pause  Pause
	Linger time.Duration // see Faults.Linger
}

// Stream answers 200 with st as server-sent events, flushing each, and
// carries out st's pause and halt.
func (s *Server[Reply, Request]) Stream(w http.ResponseWriter, r *http.Request, st Stream) {
	setHeader(w, st.Header)
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	out := &writer{w: w, rc: http.NewResponseController(w), pieces: st.Pieces}
	_ = out.rc.Flush()

	sent := 0
	for i, ev := range st.Events {
		if i > 0 && st.Halt.Mode != HaltNone && sent == st.Halt.After {
			s.halt(out, r, st)
			return
		}
		if i > 0 && st.Pause.On && sent == st.Pause.After {
			st.Pause.On = false
			if !s.keepAlive(out, r, st.Pause.For, st.KeepAlive) {
				return
			}
		}
		if out.write(ev.Text) != nil {
			return
		}
		if ev.Counted {
			sent++
		}
	}
	if st.Linger != 0 {
		s.linger(r, st.Linger)
	}
}

// linger holds the end of a response back for d (negative: until the
// client goes away or the server closes); the events are out already.
func (s *Server[Reply, Request]) linger(r *http.Request, d time.Duration) {
	var end <-chan time.Time
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		end = t.C
	}
	select {
	case <-end:
	case <-r.Context().Done():
	case <-s.done:
	}
}

// keepAlive waits d, sending ka every 100ms; it reports whether the client
// is still there.
func (s *Server[Reply, Request]) keepAlive(out *writer, r *http.Request, d time.Duration, ka string) bool {
	end := time.NewTimer(d)
	defer end.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-end.C:
			return true
		case <-tick.C:
			if out.write(ka) != nil {
				return false
			}
		case <-r.Context().Done():
			return false
		case <-s.done:
			return false
		}
	}
}

func (s *Server[Reply, Request]) halt(out *writer, r *http.Request, st Stream) {
	switch st.Halt.Mode {
	case HaltCut:
		// Abort: the server closes the connection without ending the
		// chunked body, so the client reads an unexpected EOF.
		panic(http.ErrAbortHandler)
	case HaltStall:
		select {
		case <-r.Context().Done():
		case <-s.done:
		}
	case HaltError:
		_ = out.write(st.Error)
	case HaltNone, HaltEnd:
	}
}

// writer writes a stream in the pieces it is asked for.
type writer struct {
	w      io.Writer
	rc     *http.ResponseController
	pieces []int
	piece  int // the next of pieces
}

// write sends s in pieces, flushing each.
func (o *writer) write(s string) error {
	for len(s) > 0 {
		n := len(s)
		if len(o.pieces) > 0 {
			n = min(n, max(o.pieces[o.piece%len(o.pieces)], 1))
			o.piece++
		}
		if _, err := io.WriteString(o.w, s[:n]); err != nil {
			return err
		}
		if err := o.rc.Flush(); err != nil {
			return err
		}
		s = s[n:]
	}
	return nil
}

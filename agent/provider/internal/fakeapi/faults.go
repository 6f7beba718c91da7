package fakeapi

import (
	"net/http"
	"strconv"
	"time"
)

// DefaultChunk is how many characters a piece of streamed text has unless
// a reply says otherwise.
const DefaultChunk = 5

// Faults is what a reply does besides what it says, whatever the
// protocol: when it starts, the headers it adds, and how its stream is
// interrupted.
type Faults struct {
	Delay  time.Duration // holds back the whole response, status line included
	Header http.Header   // added to the response's headers
	Halt   Halt
	Pause  Pause
	// Linger holds the end of the body back this long after its last
	// event, flushed: the end then comes in a write of its own, later, as
	// it may from a server. Negative: until the client goes away.
	Linger time.Duration
}

// WithHeader returns f with key: value added to its headers. The headers
// are copied, so replies made from the same one stay apart.
func (f Faults) WithHeader(key, value string) Faults {
	h := f.Header.Clone()
	if h == nil {
		h = http.Header{}
	}
	h.Add(key, value)
	f.Header = h
	return f
}

// CutAfter drops the connection, without ending the response, once n
// counted events have been sent.
func (f Faults) CutAfter(n int) Faults { f.Halt = Halt{Mode: HaltCut, After: n}; return f }

// EndAfter ends the response cleanly once n counted events have been sent.
func (f Faults) EndAfter(n int) Faults { f.Halt = Halt{Mode: HaltEnd, After: n}; return f }

// StallAfter stops sending once n counted events have been sent and holds
// the connection open until the client goes away.
func (f Faults) StallAfter(n int) Faults { f.Halt = Halt{Mode: HaltStall, After: n}; return f }

// ErrorAfter sends an error event of type typ saying msg once n counted
// events have been sent, and ends the response.
func (f Faults) ErrorAfter(n int, typ, msg string) Faults {
	f.Halt = Halt{Mode: HaltError, After: n, Type: typ, Message: msg}
	return f
}

// LingerEnd holds the end of the body back for d after the last event
// (negative: until the client goes away).
func (f Faults) LingerEnd(d time.Duration) Faults { f.Linger = d; return f }

// PauseAfter holds the stream for d once n counted events have been sent,
// with keep-alives, then goes on.
func (f Faults) PauseAfter(n int, d time.Duration) Faults {
	f.Pause = Pause{On: true, After: n, For: d}
	return f
}

// HaltMode is how a Halt interrupts a stream.
type HaltMode int

// The ways to interrupt a stream.
const (
	HaltNone  HaltMode = iota
	HaltCut            // drop the connection without ending the response
	HaltEnd            // end the response cleanly, however far the stream had got
	HaltStall          // keep the connection open and send nothing more
	HaltError          // send the protocol's error event and end the response
)

// Halt interrupts a stream once After counted events have been sent.
type Halt struct {
	Mode          HaltMode
	After         int
	Type, Message string // HaltError: the error's type and message
}

// Pause holds a stream for For once After counted events have been sent,
// sending a keep-alive every 100ms meanwhile, then goes on.
type Pause struct {
	On    bool
	After int
	For   time.Duration
}

// RetryAfter is the Retry-After value that asks for d: whole seconds,
// rounded up.
func RetryAfter(d time.Duration) string {
	return strconv.Itoa(int((d + time.Second - 1) / time.Second))
}

// Split cuts s into pieces of n runes.
func Split(s string, n int) []string {
	var out []string
	r := []rune(s)
	for len(r) > n {
		out = append(out, string(r[:n]))
		r = r[n:]
	}
	if len(r) > 0 {
		out = append(out, string(r))
	}
	return out
}

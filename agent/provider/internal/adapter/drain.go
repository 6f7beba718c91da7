package adapter

import (
	"context"
	"io"
	"time"
)

// Drain reads what is left of a streamed response once the message in it
// is whole (data: [DONE], message_stop), so that closing the body finds it
// at its end. Over HTTP/1.1 the transport keeps a connection for the next
// call only then: a body closed before its end takes its connection with
// it, and the next call pays for a new one (a TCP and TLS handshake with a
// remote server). The end comes just after the last event, in a write of
// its own, and the stream's reader stops at that event, so without Drain
// whether the connection lives depends on whether both writes arrived in
// one read.
//
// A server need not end the body at once. Drain waits at most drainWait
// and reads at most drainMax bytes; then it gives up and calls stop, which
// must cancel the request's context so that a read still waiting returns.
// Either way the message stands: Drain reports nothing.
func Drain(body io.Reader, stop context.CancelFunc) {
	t := time.AfterFunc(drainWait, stop)
	defer t.Stop()
	_, _ = io.Copy(io.Discard, io.LimitReader(body, drainMax))
}

const (
	// drainWait bounds the wait for a body's end after its last event:
	// the end is one more write of the server's, on a connection that
	// just carried the event, so it takes a fraction of a round trip.
	drainWait = 50 * time.Millisecond
	// drainMax bounds what Drain reads: more than an end (a chunked
	// body's closing chunk, an SSE keep-alive) would be a server sending
	// on, and that connection is not worth keeping.
	drainMax = 4 << 10
)

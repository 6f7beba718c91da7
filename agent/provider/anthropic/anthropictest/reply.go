package anthropictest

import (
	"net/http"
	"slices"
	"time"

	"github.com/latchd/latch/agent/provider/internal/fakeapi"
)

// Reply is how the fake answers one request: a model turn streamed as
// server-sent events, or an HTTP error. Build one with Text, ToolUse or a
// fault constructor and refine it with the methods, which return a copy.
type Reply struct {
	blocks []block
	stop   string
	usage  *[2]int // input, output tokens

	status     int // non-zero: answer with this HTTP error instead of a stream
	errType    string
	errMessage string

	faults  fakeapi.Faults // delay, headers, halt, pause
	chunk   int
	framing Framing
}

type block struct {
	tool     bool
	thinking bool   // a thinking block: text is the thinking
	text     string // text block
	id       string // tool_use
	name     string
	input    string
}

// Framing changes how the events of a stream are written, not what they
// say: all of it is valid server-sent events that a client must read the
// same way.
type Framing struct {
	// LineEnding ends every line: "\n" when empty; "\r\n" and "\r" are
	// valid too.
	LineEnding string
	// Pieces writes the stream in writes of these many bytes, taken in
	// turn and flushed one by one, so that lines and events arrive split
	// anywhere ([]int{1}: byte by byte). Empty: one write per event.
	Pieces []int
	// Noise puts between the events what a client must skip: comment
	// lines, pings, events of types the API may add later, an event with
	// no data, and id, retry and unknown fields.
	Noise bool
	// MultiLine spreads each event's JSON over several data lines, which
	// the client must join with "\n".
	MultiLine bool
	// NoSpace writes "data:{…}", without the optional space after the
	// colon.
	NoSpace bool
}

// Text is a model turn that says s, streamed in several text_delta pieces,
// with stop_reason "end_turn".
func Text(s string) Reply { return Reply{}.AndText(s) }

// ToolUse is a model turn that calls a tool, with its input (a JSON object)
// streamed in several input_json_delta pieces, and stop_reason "tool_use".
func ToolUse(id, name, input string) Reply { return Reply{}.AndToolUse(id, name, input) }

// AndText adds a text block to the turn.
func (r Reply) AndText(s string) Reply {
	r.blocks = append(slices.Clip(r.blocks), block{text: s})
	return r
}

// AndToolUse adds a tool_use block to the turn.
func (r Reply) AndToolUse(id, name, input string) Reply {
	r.blocks = append(slices.Clip(r.blocks), block{tool: true, id: id, name: name, input: input})
	return r
}

// AndThinking adds a thinking block, streamed as thinking_delta pieces and
// a signature_delta, as the API does when extended thinking is on. latch
// does not ask for thinking; a client must skip the block.
func (r Reply) AndThinking(s string) Reply {
	r.blocks = append(slices.Clip(r.blocks), block{thinking: true, text: s})
	return r
}

// Framed sets how the stream is written; see Framing.
func (r Reply) Framed(f Framing) Reply { r.framing = f; return r }

// StopReason overrides the stop_reason ("tool_use" when the turn calls a
// tool, else "end_turn").
func (r Reply) StopReason(s string) Reply { r.stop = s; return r }

// Usage sets the token counts reported (by default about a token per four
// bytes of request body in, and one per content delta out).
func (r Reply) Usage(in, out int) Reply { r.usage = &[2]int{in, out}; return r }

// Chunk sets the size, in characters, of the text_delta pieces (default 5;
// input_json_delta pieces are twice as long).
func (r Reply) Chunk(n int) Reply { r.chunk = max(n, 1); return r }

// Delay holds back the response — status line included — for d: a slow
// first byte.
func (r Reply) Delay(d time.Duration) Reply { r.faults.Delay = d; return r }

// Header adds a response header.
func (r Reply) Header(key, value string) Reply { r.faults = r.faults.WithHeader(key, value); return r }

// CutAfter drops the connection without ending the stream once n
// content_block_delta events have been sent (0: right after message_start).
func (r Reply) CutAfter(n int) Reply { r.faults = r.faults.CutAfter(n); return r }

// EndAfter ends the response cleanly once n content_block_delta events have
// been sent, so the stream lacks message_delta and message_stop.
func (r Reply) EndAfter(n int) Reply { r.faults = r.faults.EndAfter(n); return r }

// StallAfter stops sending once n content_block_delta events have been sent
// and holds the connection open until the client goes away.
func (r Reply) StallAfter(n int) Reply { r.faults = r.faults.StallAfter(n); return r }

// ErrorAfter sends an error event (as the API does when it is overloaded
// mid-stream) once n content_block_delta events have been sent, and ends
// the stream.
func (r Reply) ErrorAfter(n int, errType, message string) Reply {
	r.faults = r.faults.ErrorAfter(n, errType, message)
	return r
}

// LingerEnd holds the end of the body back for d after message_stop,
// flushed, so the end arrives in a read of its own (negative: until the
// client goes away).
func (r Reply) LingerEnd(d time.Duration) Reply {
	r.faults = r.faults.LingerEnd(d)
	return r
}

// PauseAfter stops for d once n content_block_delta events have been sent, sending
// a ping event, as the API does while a model is slow, every 100ms meanwhile, then goes on.
func (r Reply) PauseAfter(n int, d time.Duration) Reply {
	r.faults = r.faults.PauseAfter(n, d)
	return r
}

// APIError answers with an HTTP error in the API's shape:
// {"type":"error","error":{"type":errType,"message":message},"request_id":…}.
func APIError(status int, errType, message string) Reply {
	return Reply{status: status, errType: errType, errMessage: message}
}

// RateLimited answers 429 rate_limit_error with Retry-After (whole seconds,
// rounded up; none if retryAfter is 0).
func RateLimited(retryAfter time.Duration) Reply {
	r := APIError(http.StatusTooManyRequests, "rate_limit_error",
		"This request would exceed the rate limit for your organization of 50 requests per minute.")
	if retryAfter > 0 {
		r = r.Header("Retry-After", fakeapi.RetryAfter(retryAfter))
	}
	return r
}

// Overloaded answers 529 overloaded_error.
func Overloaded() Reply { return APIError(529, "overloaded_error", "Overloaded") }

// ServerError answers 500 api_error.
func ServerError() Reply {
	return APIError(http.StatusInternalServerError, "api_error", "Internal server error")
}

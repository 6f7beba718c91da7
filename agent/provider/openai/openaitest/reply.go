package openaitest

import (
	"net/http"
	"slices"
	"time"

	"github.com/latchd/latch/agent/provider/internal/fakeapi"
)

// Reply is how the fake answers one request: a model turn streamed as
// chat.completion.chunk events, or an HTTP error. Build one with Text,
// ToolUse or a fault constructor and refine it with the methods, which
// return a copy.
type Reply struct {
	blocks []block
	finish string
	usage  *[2]int // prompt, completion tokens

	status int    // non-zero: answer with this HTTP error instead of a stream
	body   string // the error body; OpenAI's error JSON unless raw
	ctype  string

	faults     fakeapi.Faults // delay, headers, halt, pause
	chunk      int
	wholeCalls bool
	noIndex    bool
	sameIndex  bool
	errorChunk bool // the error fault is OpenRouter's error chunk
}

type block struct {
	tool           bool
	text           string
	id, name, args string
}

// Text is a turn that says s, streamed in several content pieces, with
// finish_reason "stop".
func Text(s string) Reply { return Reply{}.AndText(s) }

// ToolUse is a turn that calls a function: a first chunk with the call's
// index, id and name, then its arguments in several pieces, and
// finish_reason "tool_calls".
func ToolUse(id, name, args string) Reply { return Reply{}.AndToolUse(id, name, args) }

// AndText adds content to the turn. All content is streamed before the
// tool calls, as one message holds one content string.
func (r Reply) AndText(s string) Reply {
	r.blocks = append(slices.Clip(r.blocks), block{text: s})
	return r
}

// AndToolUse adds a tool call (parallel tool calls get indexes 0, 1, …).
func (r Reply) AndToolUse(id, name, args string) Reply {
	r.blocks = append(slices.Clip(r.blocks), block{tool: true, id: id, name: name, args: args})
	return r
}

// FinishReason overrides finish_reason ("tool_calls" when the turn calls a
// tool, else "stop"). Ollama, for one, has sent "stop" with tool calls.
func (r Reply) FinishReason(s string) Reply { r.finish = s; return r }

// Usage sets the token counts of the usage chunk, which is sent when the
// request asks for it with stream_options.include_usage (by default about a
// token per four bytes of request body in, and one per content chunk out).
func (r Reply) Usage(prompt, completion int) Reply { r.usage = &[2]int{prompt, completion}; return r }

// Chunk sets the size, in characters, of content pieces (default 5;
// argument pieces are twice as long).
func (r Reply) Chunk(n int) Reply { r.chunk = max(n, 1); return r }

// WholeToolCalls sends each tool call in one chunk, id, name and all
// arguments together, as Ollama and llama.cpp do.
func (r Reply) WholeToolCalls() Reply { r.wholeCalls = true; return r }

// NoToolCallIndex leaves "index" out of tool calls, as some servers do.
func (r Reply) NoToolCallIndex() Reply { r.noIndex = true; return r }

// SameToolCallIndex sends every tool call under index 0, each with its own
// id, as Ollama 0.20 does (ollama/ollama#15457).
func (r Reply) SameToolCallIndex() Reply { r.sameIndex = true; return r }

// Delay holds back the response — status line included — for d: a slow
// first byte.
func (r Reply) Delay(d time.Duration) Reply { r.faults.Delay = d; return r }

// Header adds a response header.
func (r Reply) Header(key, value string) Reply { r.faults = r.faults.WithHeader(key, value); return r }

// CutAfter drops the connection once n content chunks have been sent (0:
// right after the first chunk, which carries only the role).
func (r Reply) CutAfter(n int) Reply { r.faults = r.faults.CutAfter(n); return r }

// EndAfter ends the response cleanly once n content chunks have been sent:
// no finish_reason, no data: [DONE].
func (r Reply) EndAfter(n int) Reply { r.faults = r.faults.EndAfter(n); return r }

// StallAfter stops sending once n content chunks have been sent and holds
// the connection open until the client goes away.
func (r Reply) StallAfter(n int) Reply { r.faults = r.faults.StallAfter(n); return r }

// ErrorAfter sends data: {"error":{…}} once n content chunks have been
// sent, as OpenAI does when a stream fails, and ends the response.
func (r Reply) ErrorAfter(n int, errType, message string) Reply {
	r.faults = r.faults.ErrorAfter(n, errType, message)
	return r
}

// ErrorChunkAfter sends, once n content chunks have been sent, the chunk
// by which OpenRouter reports a failure mid-reply — a chat.completion.chunk
// with a top-level {"error":{"code":code,"message":message}} and
// finish_reason "error" — and ends the response.
func (r Reply) ErrorChunkAfter(n int, code, message string) Reply {
	r.faults = r.faults.ErrorAfter(n, code, message)
	r.errorChunk = true
	return r
}

// LingerEnd holds the end of the body back for d after data: [DONE],
// flushed, so the end arrives in a read of its own (negative: until the
// client goes away).
func (r Reply) LingerEnd(d time.Duration) Reply {
	r.faults = r.faults.LingerEnd(d)
	return r
}

// PauseAfter stops for d once n content chunks have been sent, sending
// a ": keep-alive" comment line, as OpenRouter does while a model is slow, every 100ms meanwhile, then goes on.
func (r Reply) PauseAfter(n int, d time.Duration) Reply {
	r.faults = r.faults.PauseAfter(n, d)
	return r
}

// APIError answers with an HTTP error in OpenAI's shape:
// {"error":{"message":…,"type":…,"param":null,"code":…}}; an empty code is
// sent as null.
func APIError(status int, errType, code, message string) Reply {
	return Reply{status: status, body: string(errorBody(errType, code, message))}
}

// RawError answers with status and a body that is not OpenAI's error JSON,
// as a proxy or a bare server does (content type text/plain, or text/html
// if body starts with "<").
func RawError(status int, body string) Reply {
	ctype := "text/plain; charset=utf-8"
	if len(body) > 0 && body[0] == '<' {
		ctype = "text/html; charset=utf-8"
	}
	return Reply{status: status, body: body, ctype: ctype}
}

// RateLimited answers 429 rate_limit_exceeded with Retry-After (whole
// seconds, rounded up; none if retryAfter is 0).
func RateLimited(retryAfter time.Duration) Reply {
	r := APIError(http.StatusTooManyRequests, "requests", "rate_limit_exceeded",
		"Rate limit reached for requests per min (RPM): Limit 3, Used 3, Requested 1.")
	if retryAfter > 0 {
		r = r.Header("Retry-After", fakeapi.RetryAfter(retryAfter))
	}
	return r
}

// ServerError answers 500 server_error.
func ServerError() Reply {
	return APIError(http.StatusInternalServerError, "server_error", "",
		"The server had an error while processing your request. Sorry about that!")
}

// Overloaded answers 503 server_error.
func Overloaded() Reply {
	return APIError(http.StatusServiceUnavailable, "server_error", "", "The server is overloaded or not ready yet.")
}

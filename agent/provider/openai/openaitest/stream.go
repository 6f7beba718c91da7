package openaitest

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

const defaultChunk = 5

// event is one data: line; content marks a chunk with content or a piece of
// a tool call.
type event struct {
	data    []byte
	content bool
}

// events is the whole stream of a scripted turn, as OpenAI sends it.
func events(reply Reply, req Request, id string) []event {
	g := &gen{
		reply: reply, id: id, model: req.Params.Model, created: time.Now().Unix(),
		usage: req.Params.StreamOptions != nil && req.Params.StreamOptions.IncludeUsage,
		size:  cmp.Or(reply.chunk, defaultChunk),
	}
	first := map[string]any{"role": "assistant", "content": "", "refusal": nil}
	if len(reply.blocks) > 0 && reply.blocks[0].tool {
		first["content"] = nil
	}
	g.add(g.delta(first, nil), false)

	finish := "stop"
	for _, b := range reply.blocks {
		if !b.tool {
			for _, piece := range split(b.text, g.size) {
				g.add(g.delta(map[string]any{"content": piece}, nil), true)
			}
		}
	}
	index := 0
	for _, b := range reply.blocks {
		if b.tool {
			g.toolCall(index, b)
			index++
			finish = "tool_calls"
		}
	}
	g.add(g.delta(map[string]any{}, cmp.Or(reply.finish, finish)), false)
	if g.usage {
		in, out := len(req.Body)/4+1, g.out
		if reply.usage != nil {
			in, out = reply.usage[0], reply.usage[1]
		}
		c := g.chunk([]any{})
		c["usage"] = map[string]any{"prompt_tokens": in, "completion_tokens": out, "total_tokens": in + out}
		g.add(c, false)
	}
	g.evs = append(g.evs, event{data: []byte("[DONE]")})
	return g.evs
}

// gen builds the chunks of one stream.
type gen struct {
	reply     Reply
	id, model string
	created   int64
	usage     bool // stream_options.include_usage
	size      int  // content piece size
	evs       []event
	out       int // content chunks so far
}

func (g *gen) chunk(choices []any) map[string]any {
	c := map[string]any{
		"id": g.id, "object": "chat.completion.chunk", "created": g.created,
		"model": g.model, "system_fingerprint": "fp_fake", "choices": choices,
	}
	if g.usage {
		c["usage"] = nil
	}
	return c
}

// delta is a chunk with one choice.
func (g *gen) delta(delta map[string]any, finish any) map[string]any {
	return g.chunk([]any{map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish}})
}

func (g *gen) add(v map[string]any, content bool) {
	b, _ := json.Marshal(v)
	g.evs = append(g.evs, event{data: b, content: content})
	if content {
		g.out++
	}
}

// toolCall adds the chunks of one tool call: id and name first, then the
// arguments in pieces, or all at once for WholeToolCalls.
func (g *gen) toolCall(index int, b block) {
	call := func(fields map[string]any) {
		if !g.reply.noIndex {
			fields["index"] = index
		}
		g.add(g.delta(map[string]any{"tool_calls": []any{fields}}, nil), true)
	}
	if g.reply.wholeCalls {
		call(map[string]any{"id": b.id, "type": "function", "function": map[string]any{"name": b.name, "arguments": b.args}})
		return
	}
	call(map[string]any{"id": b.id, "type": "function", "function": map[string]any{"name": b.name, "arguments": ""}})
	for _, piece := range split(b.args, 2*g.size) {
		call(map[string]any{"function": map[string]any{"arguments": piece}})
	}
}

// split cuts s into pieces of n runes.
func split(s string, n int) []string {
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

// stream writes a scripted turn as server-sent events, flushing each one,
// and carries out the reply's halt.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, id string, req Request, reply Reply) {
	evs := events(reply, req, id)
	h := w.Header()
	for k, vs := range reply.header {
		h[k] = append(h[k], vs...)
	}
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()

	sent := 0
	for i, ev := range evs {
		if i > 0 && reply.halt.mode != haltNone && sent == reply.halt.after {
			s.halt(w, r, reply.halt)
			return
		}
		if i > 0 && reply.pause.on && sent == reply.pause.after {
			reply.pause.on = false
			if !s.keepAlive(w, r, reply.pause.d) {
				return
			}
		}
		if _, err := fmt.Fprintf(w, "data: %s\n\n", ev.data); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
		if ev.content {
			sent++
		}
	}
}

// keepAlive waits d, sending a keep-alive every 100ms; it reports whether
// the client is still there.
func (s *Server) keepAlive(w http.ResponseWriter, r *http.Request, d time.Duration) bool {
	end := time.NewTimer(d)
	defer end.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	rc := http.NewResponseController(w)
	for {
		select {
		case <-end.C:
			return true
		case <-tick.C:
			if _, err := io.WriteString(w, ": keep-alive\n\n"); err != nil || rc.Flush() != nil {
				return false
			}
		case <-r.Context().Done():
			return false
		case <-s.done:
			return false
		}
	}
}

func (s *Server) halt(w http.ResponseWriter, r *http.Request, h halt) {
	switch h.mode {
	case haltCut:
		// Abort: the server closes the connection without ending the
		// chunked body, so the client reads an unexpected EOF.
		panic(http.ErrAbortHandler)
	case haltStall:
		select {
		case <-r.Context().Done():
		case <-s.done:
		}
	case haltError:
		_, _ = fmt.Fprintf(w, "data: %s\n\n", errorBody(h.typ, "", h.msg))
		_ = http.NewResponseController(w).Flush()
	case haltEnd:
	}
}

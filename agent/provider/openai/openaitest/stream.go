package openaitest

import (
	"cmp"
	"encoding/json"
	"net/http"
	"time"

	"github.com/latchd/latch/agent/provider/internal/fakeapi"
)

// events is the whole stream of a scripted turn, as OpenAI sends it.
func events(reply Reply, req Request, id string) []fakeapi.Event {
	g := &gen{
		reply: reply, id: id, model: req.Params.Model, created: time.Now().Unix(),
		usage: req.Params.StreamOptions != nil && req.Params.StreamOptions.IncludeUsage,
		size:  cmp.Or(reply.chunk, fakeapi.DefaultChunk),
	}
	first := map[string]any{"role": "assistant", "content": "", "refusal": nil}
	if len(reply.blocks) > 0 && reply.blocks[0].tool {
		first["content"] = nil
	}
	g.add(g.delta(first, nil), false)

	finish := "stop"
	for _, b := range reply.blocks {
		if !b.tool {
			for _, piece := range fakeapi.Split(b.text, g.size) {
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
	g.evs = append(g.evs, data([]byte("[DONE]"), false))
	return g.evs
}

// gen builds the chunks of one stream.
type gen struct {
	reply     Reply
	id, model string
	created   int64
	usage     bool // stream_options.include_usage
	size      int  // content piece size
	evs       []fakeapi.Event
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
	g.evs = append(g.evs, data(b, content))
	if content {
		g.out++
	}
}

// toolCall adds the chunks of one tool call: id and name first, then the
// arguments in pieces, or all at once for WholeToolCalls.
func (g *gen) toolCall(index int, b block) {
	if g.reply.sameIndex {
		index = 0
	}
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
	for _, piece := range fakeapi.Split(b.args, 2*g.size) {
		call(map[string]any{"function": map[string]any{"arguments": piece}})
	}
}

// data is a data: line, and the blank line that ends its event; content
// marks a chunk with content or a piece of a tool call.
func data(b []byte, content bool) fakeapi.Event {
	return fakeapi.Event{Text: "data: " + string(b) + "\n\n", Counted: content}
}

// stream writes a scripted turn as server-sent events, flushing each one,
// and carries out the reply's faults.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, id string, req Request, reply Reply) {
	h := reply.faults.Halt
	fail := errorBody(h.Type, "", h.Message)
	if reply.errorChunk {
		fail = errorChunk(id, req.Params.Model, h.Type, h.Message)
	}
	s.api.Stream(w, r, fakeapi.Stream{
		Header: reply.faults.Header,
		Events: events(reply, req, id),
		// OpenRouter's keep-alive while a model is slow.
		KeepAlive: ": keep-alive\n\n",
		Error:     data(fail, false).Text,
		Halt:      h,
		Pause:     reply.faults.Pause,
		Linger:    reply.faults.Linger,
	})
}

// errorChunk is how OpenRouter reports a failure mid-reply: a chunk like
// the others, but with an error object beside the choices and
// finish_reason "error".
func errorChunk(id, model, code, message string) []byte {
	g := &gen{id: id, model: model, created: time.Now().Unix()}
	c := g.delta(map[string]any{"content": ""}, "error")
	c["provider"] = "openai"
	c["error"] = map[string]any{"code": code, "message": message}
	b, _ := json.Marshal(c)
	return b
}

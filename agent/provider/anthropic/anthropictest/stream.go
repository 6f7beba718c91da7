package anthropictest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

const defaultChunk = 5

// event is one server-sent event; delta marks content_block_delta.
type event struct {
	name  string
	data  any
	delta bool
}

// events is the whole stream of a scripted turn, as the API sends it.
func events(reply Reply, req Request, msgID string) []event {
	chunk := reply.chunk
	if chunk == 0 {
		chunk = defaultChunk
	}
	in, out := len(req.Body)/4+1, 0
	var evs []event
	add := func(name string, data any) { evs = append(evs, event{name: name, data: data}) }
	addDelta := func(index int, delta map[string]any) {
		evs = append(evs, event{name: "content_block_delta", delta: true, data: map[string]any{
			"type": "content_block_delta", "index": index, "delta": delta,
		}})
		out++
	}
	// message_start's usage is filled in below, once out is known.
	start := map[string]any{
		"id": msgID, "type": "message", "role": "assistant", "model": req.Params.Model,
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil,
	}
	add("message_start", map[string]any{"type": "message_start", "message": start})

	stop := "end_turn"
	for i, b := range reply.blocks {
		if !b.tool {
			add("content_block_start", map[string]any{"type": "content_block_start", "index": i,
				"content_block": map[string]any{"type": "text", "text": ""}})
			if i == 0 {
				add("ping", map[string]any{"type": "ping"})
			}
			for _, piece := range split(b.text, chunk) {
				addDelta(i, map[string]any{"type": "text_delta", "text": piece})
			}
		} else {
			stop = "tool_use"
			add("content_block_start", map[string]any{"type": "content_block_start", "index": i,
				"content_block": map[string]any{"type": "tool_use", "id": b.id, "name": b.name, "input": map[string]any{}}})
			if i == 0 {
				add("ping", map[string]any{"type": "ping"})
			}
			// The API opens every tool input with an empty piece.
			addDelta(i, map[string]any{"type": "input_json_delta", "partial_json": ""})
			for _, piece := range split(b.input, 2*chunk) {
				addDelta(i, map[string]any{"type": "input_json_delta", "partial_json": piece})
			}
		}
		add("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	if reply.stop != "" {
		stop = reply.stop
	}
	if reply.usage != nil {
		in, out = reply.usage[0], reply.usage[1]
	}
	start["usage"] = map[string]any{"input_tokens": in, "output_tokens": 1,
		"cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
	add("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": out}})
	add("message_stop", map[string]any{"type": "message_stop"})
	return evs
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
func (s *Server) stream(w http.ResponseWriter, r *http.Request, reqID string, req Request, reply Reply) {
	evs := events(reply, req, strings.Replace(reqID, "req_", "msg_", 1))

	h := w.Header()
	for k, vs := range reply.header {
		h[k] = append(h[k], vs...)
	}
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("Request-Id", reqID)
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()

	deltas := 0
	for i, ev := range evs {
		if i > 0 && reply.halt.mode != haltNone && deltas == reply.halt.after {
			s.halt(w, r, reply.halt)
			return
		}
		if i > 0 && reply.pause.on && deltas == reply.pause.after {
			reply.pause.on = false
			if !s.keepAlive(w, r, reply.pause.d) {
				return
			}
		}
		data, _ := json.Marshal(ev.data)
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev.name, data); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
		if ev.delta {
			deltas++
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
			if _, err := io.WriteString(w, "event: ping\ndata: {\"type\": \"ping\"}\n\n"); err != nil || rc.Flush() != nil {
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
		data := errorBody(h.typ, h.msg, "")
		_, _ = fmt.Fprintf(w, "event: error\ndata: %s\n\n", data)
		_ = http.NewResponseController(w).Flush()
	case haltEnd:
	}
}

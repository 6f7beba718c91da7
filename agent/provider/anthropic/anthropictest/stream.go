package anthropictest

import (
	"cmp"
	"encoding/json"
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
		var start map[string]any
		switch {
		case b.thinking:
			start = map[string]any{"type": "thinking", "thinking": "", "signature": ""}
		case b.tool:
			stop = "tool_use"
			start = map[string]any{"type": "tool_use", "id": b.id, "name": b.name, "input": map[string]any{}}
		default:
			start = map[string]any{"type": "text", "text": ""}
		}
		add("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": start})
		if i == 0 {
			add("ping", map[string]any{"type": "ping"})
		}
		switch {
		case b.thinking:
			for _, piece := range split(b.text, chunk) {
				addDelta(i, map[string]any{"type": "thinking_delta", "thinking": piece})
			}
			addDelta(i, map[string]any{"type": "signature_delta", "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"})
		case b.tool:
			// The API opens every tool input with an empty piece.
			addDelta(i, map[string]any{"type": "input_json_delta", "partial_json": ""})
			for _, piece := range split(b.input, 2*chunk) {
				addDelta(i, map[string]any{"type": "input_json_delta", "partial_json": piece})
			}
		default:
			for _, piece := range split(b.text, chunk) {
				addDelta(i, map[string]any{"type": "text_delta", "text": piece})
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
	out := &framer{w: w, rc: http.NewResponseController(w), f: reply.framing}
	_ = out.rc.Flush()

	deltas := 0
	for i, ev := range evs {
		if i > 0 && reply.halt.mode != haltNone && deltas == reply.halt.after {
			s.halt(out, r, reply.halt)
			return
		}
		if i > 0 && reply.pause.on && deltas == reply.pause.after {
			reply.pause.on = false
			if !s.keepAlive(out, r, reply.pause.d) {
				return
			}
		}
		if out.event(ev.name, ev.data) != nil {
			return
		}
		if ev.delta {
			deltas++
		}
	}
}

// framer writes events as Framing says.
type framer struct {
	w     io.Writer
	rc    *http.ResponseController
	f     Framing
	piece int // the next of f.Pieces
}

// event writes one event (after the noise, if any) and flushes it.
func (o *framer) event(name string, data any) error {
	var js []byte
	if o.f.MultiLine {
		js, _ = json.MarshalIndent(data, "", "  ")
	} else {
		js, _ = json.Marshal(data)
	}
	nl := cmp.Or(o.f.LineEnding, "\n")
	sep := ": "
	if o.f.NoSpace {
		sep = ":"
	}
	var b strings.Builder
	if o.f.Noise {
		for _, line := range []string{
			": a comment, as proxies send to keep a connection open", "",
			"event: ping", "data" + sep + `{"type": "ping"}`, "",
			"event: future_event", "data" + sep + `{"type":"future_event","index":"not a number","delta":[1,2]}`, "",
			"data" + sep + `{"type":"ping"}`, "", // no event name
			"event: message_stop", "", // no data: not dispatched
			"id: 7", "retry: 3000", "x-unknown-field: yes",
		} {
			b.WriteString(line + nl)
		}
	}
	b.WriteString("event" + sep + name + nl)
	for line := range strings.SplitSeq(string(js), "\n") {
		b.WriteString("data" + sep + line + nl)
	}
	b.WriteString(nl)
	return o.write(b.String())
}

// write sends s in the pieces Framing asks for, flushing each.
func (o *framer) write(s string) error {
	for len(s) > 0 {
		n := len(s)
		if len(o.f.Pieces) > 0 {
			n = min(n, max(o.f.Pieces[o.piece%len(o.f.Pieces)], 1))
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

// keepAlive waits d, sending a ping event, as the API does while a model
// is slow, every 100ms; it reports whether the client is still there.
func (s *Server) keepAlive(out *framer, r *http.Request, d time.Duration) bool {
	end := time.NewTimer(d)
	defer end.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-end.C:
			return true
		case <-tick.C:
			if out.event("ping", map[string]any{"type": "ping"}) != nil {
				return false
			}
		case <-r.Context().Done():
			return false
		case <-s.done:
			return false
		}
	}
}

func (s *Server) halt(out *framer, r *http.Request, h halt) {
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
		_ = out.event("error", map[string]any{"type": "error",
			"error": map[string]string{"type": h.typ, "message": h.msg}})
	case haltEnd:
	}
}

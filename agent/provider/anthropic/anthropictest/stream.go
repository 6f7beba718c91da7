package anthropictest

import (
	"cmp"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/latchd/latch/agent/provider/internal/fakeapi"
)

// event is one server-sent event; delta marks content_block_delta.
type event struct {
	name  string
	data  any
	delta bool
}

// events is the whole stream of a scripted turn, as the API sends it.
func events(reply Reply, req Request, msgID string) []event {
	chunk := cmp.Or(reply.chunk, fakeapi.DefaultChunk)
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
			for _, piece := range fakeapi.Split(b.text, chunk) {
				addDelta(i, map[string]any{"type": "thinking_delta", "thinking": piece})
			}
			addDelta(i, map[string]any{"type": "signature_delta", "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"})
		case b.tool:
			// The API opens every tool input with an empty piece.
			addDelta(i, map[string]any{"type": "input_json_delta", "partial_json": ""})
			for _, piece := range fakeapi.Split(b.input, 2*chunk) {
				addDelta(i, map[string]any{"type": "input_json_delta", "partial_json": piece})
			}
		default:
			for _, piece := range fakeapi.Split(b.text, chunk) {
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

// stream writes a scripted turn as server-sent events, flushing each one,
// and carries out the reply's faults.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, reqID string, req Request, reply Reply) {
	f := reply.framing
	var evs []fakeapi.Event
	for _, ev := range events(reply, req, strings.Replace(reqID, "req_", "msg_", 1)) {
		evs = append(evs, fakeapi.Event{Text: f.event(ev.name, ev.data), Counted: ev.delta})
	}
	h := reply.faults.Halt
	s.api.Stream(w, r, fakeapi.Stream{
		Header: withID(reply.faults.Header, reqID),
		Events: evs,
		// The API's keep-alive while a model is slow.
		KeepAlive: f.event("ping", map[string]any{"type": "ping"}),
		Error: f.event("error", map[string]any{"type": "error",
			"error": map[string]string{"type": h.Type, "message": h.Message}}),
		Pieces: f.Pieces,
		Halt:   h,
		Pause:  reply.faults.Pause,
		Linger: reply.faults.Linger,
	})
}

// event renders one event (after the noise, if any) as f says.
func (f Framing) event(name string, data any) string {
	var js []byte
	if f.MultiLine {
		js, _ = json.MarshalIndent(data, "", "  ")
	} else {
		js, _ = json.Marshal(data)
	}
	nl := cmp.Or(f.LineEnding, "\n")
	sep := ": "
	if f.NoSpace {
		sep = ":"
	}
	var b strings.Builder
	if f.Noise {
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
	return b.String()
}

package openaitest

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
)

// Responses is a fake of OpenAI's Responses API (POST /v1/responses,
// streamed), the API OpenAI's Codex CLI speaks. Each request takes the
// next scripted ResponsesReply, streamed as the API streams it:
// response.created, each output item added, its text in
// response.output_text.delta pieces, done, then response.completed with
// usage. It checks the Bearer key and records every request body. All
// methods are safe for concurrent use.
type Responses struct {
	key string
	srv *httptest.Server

	mu       sync.Mutex
	script   []ResponsesReply
	requests []json.RawMessage
}

// ResponsesReply is one scripted model turn: output items in order.
type ResponsesReply struct {
	items []map[string]any
}

// ResponsesText is a reply of one assistant message.
func ResponsesText(s string) ResponsesReply { return ResponsesReply{}.AndText(s) }

// ResponsesCall is a reply of one function call.
func ResponsesCall(callID, name, arguments string) ResponsesReply {
	return ResponsesReply{}.AndCall(callID, name, arguments)
}

// AndText adds an assistant message.
func (r ResponsesReply) AndText(s string) ResponsesReply {
	r.items = append(r.items, map[string]any{"type": "message", "role": "assistant", "status": "completed",
		"content": []any{map[string]any{"type": "output_text", "text": s, "annotations": []any{}}}})
	return r
}

// AndCall adds a function call.
func (r ResponsesReply) AndCall(callID, name, arguments string) ResponsesReply {
	r.items = append(r.items, map[string]any{"type": "function_call", "status": "completed",
		"call_id": callID, "name": name, "arguments": arguments})
	return r
}

// NewResponses starts a fake on 127.0.0.1 that accepts apiKey.
func NewResponses(apiKey string) *Responses {
	f := &Responses{key: apiKey}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	return f
}

// URL is the base URL to configure, /v1 included.
func (f *Responses) URL() string { return f.srv.URL + "/v1" }

// Close stops the server.
func (f *Responses) Close() { f.srv.Close() }

// Script queues replies.
func (f *Responses) Script(replies ...ResponsesReply) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.script = append(f.script, replies...)
}

// Requests returns the body of every request to /v1/responses so far.
func (f *Responses) Requests() []json.RawMessage {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]json.RawMessage(nil), f.requests...)
}

func (f *Responses) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/responses" {
		http.Error(w, `{"error":{"message":"not found","type":"invalid_request_error"}}`, http.StatusNotFound)
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+f.key {
		http.Error(w, `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}`, http.StatusUnauthorized)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil || !json.Valid(body) {
		http.Error(w, `{"error":{"message":"invalid JSON body","type":"invalid_request_error"}}`, http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.requests = append(f.requests, body)
	var reply ResponsesReply
	ok := len(f.script) > 0
	if ok {
		reply, f.script = f.script[0], f.script[1:]
	}
	n := len(f.requests)
	f.mu.Unlock()
	if !ok {
		http.Error(w, `{"error":{"message":"openaitest: no scripted reply left","type":"invalid_request_error"}}`, http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	id := fmt.Sprintf("resp_fake_%d", n)
	send := func(v map[string]any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", v["type"], b)
		if fl, ok := w.(http.Flusher); ok {
			fl.Flush()
		}
	}
	send(map[string]any{"type": "response.created", "response": map[string]any{"id": id, "status": "in_progress"}})
	for i, item := range reply.items {
		item = maps.Clone(item)
		item["id"] = fmt.Sprintf("item_%d_%d", n, i)
		send(map[string]any{"type": "response.output_item.added", "output_index": i, "item": item})
		if item["type"] == "message" {
			text := item["content"].([]any)[0].(map[string]any)["text"].(string)
			for _, piece := range pieces(text) {
				send(map[string]any{"type": "response.output_text.delta", "item_id": item["id"], "output_index": i,
					"content_index": 0, "delta": piece})
			}
		}
		send(map[string]any{"type": "response.output_item.done", "output_index": i, "item": item})
	}
	send(map[string]any{"type": "response.completed", "response": map[string]any{"id": id, "status": "completed",
		"usage": map[string]any{"input_tokens": 100, "input_tokens_details": map[string]any{"cached_tokens": 0},
			"output_tokens": 10, "output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": 110}}})
}

// pieces splits s in two where it can, so that a client must join deltas.
func pieces(s string) []string {
	if i := strings.IndexByte(s, ' '); i > 0 {
		return []string{s[:i], s[i:]}
	}
	return []string{s}
}

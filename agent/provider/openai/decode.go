package openai

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/latchd/latch/agent/provider"
	"github.com/latchd/latch/agent/provider/internal/adapter"
)

// chunk is a stream chunk with the error object OpenRouter adds to it: a
// failure mid-reply comes as an ordinary chunk carrying "error" and
// finish_reason "error". go-openai knows only OpenAI's data: {"error":…}
// line, which Recv returns as an error, and would drop the field.
type chunk struct {
	goopenai.ChatCompletionStreamResponse
	Error *goopenai.APIError `json:"error"`
}

// recv reads the next chunk of stream.
func recv(stream *goopenai.ChatCompletionStream) (chunk, error) {
	var ch chunk
	raw, err := stream.RecvRaw()
	if err != nil {
		return ch, err
	}
	return ch, json.Unmarshal(raw, &ch)
}

// accumulator assembles the assistant message from stream chunks.
type accumulator struct {
	text     strings.Builder
	calls    []*toolCall // in order of first appearance
	byIndex  map[int]*toolCall
	finish   string
	finished bool
	usage    provider.Usage
}

type toolCall struct {
	id, name string
	args     strings.Builder
}

func newAccumulator() *accumulator {
	return &accumulator{byIndex: map[int]*toolCall{}}
}

// add takes one chunk; text deltas go to emit as they come.
func (acc *accumulator) add(chunk goopenai.ChatCompletionStreamResponse, emit func(string)) {
	if u := chunk.Usage; u != nil {
		acc.usage = provider.Usage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens}
	}
	for _, ch := range chunk.Choices {
		if ch.Index != 0 {
			continue // only one choice is asked for
		}
		d := ch.Delta
		for _, s := range []string{d.Content, d.Refusal} {
			if s != "" {
				acc.text.WriteString(s)
				emit(s)
			}
		}
		for _, tc := range d.ToolCalls {
			acc.addCall(tc)
		}
		if ch.FinishReason != "" && ch.FinishReason != goopenai.FinishReasonNull {
			acc.finish, acc.finished = string(ch.FinishReason), true
		}
	}
}

// addCall adds a piece of a tool call. OpenAI sends the id and name in the
// first piece of each call and the arguments in the pieces after it, all
// under the call's index; some servers send a whole call at once, or leave
// the index out, in which case a new id starts a new call. A new id under
// an index already taken starts a new call too: Ollama 0.20 sends every
// call of a turn under index 0, each with its own id (ollama/ollama#15457),
// and adding them up would lose all but the first, their arguments run
// together.
func (acc *accumulator) addCall(tc goopenai.ToolCall) {
	var call *toolCall
	switch {
	case tc.Index != nil:
		call = acc.byIndex[*tc.Index]
		if call != nil && tc.ID != "" && call.id != "" && tc.ID != call.id {
			call = nil
		}
	case len(acc.calls) > 0 && (tc.ID == "" || tc.ID == acc.calls[len(acc.calls)-1].id):
		call = acc.calls[len(acc.calls)-1]
	}
	if call == nil {
		call = &toolCall{}
		acc.calls = append(acc.calls, call)
		if tc.Index != nil {
			// Pieces without an id that follow belong to the newest call.
			acc.byIndex[*tc.Index] = call
		}
	}
	if call.id == "" {
		call.id = tc.ID
	}
	if call.name == "" {
		call.name = tc.Function.Name
	}
	call.args.WriteString(tc.Function.Arguments)
}

// response is the finished message.
func (acc *accumulator) response() provider.Response {
	r := acc.partial()
	for i, c := range acc.calls {
		id := c.id
		if id == "" {
			// Some local servers send none; the tool result needs one.
			id = fmt.Sprintf("call_%d", i)
		}
		r.Content = append(r.Content, provider.Block{
			Type:  provider.BlockToolUse,
			ID:    id,
			Name:  c.name,
			Input: toolInput(c.args.String()),
		})
	}
	r.StopReason = stopReason(acc.finish, len(acc.calls) > 0)
	r.Usage = acc.usage
	return r
}

// partial is the text that arrived, for a message that did not finish.
func (acc *accumulator) partial() provider.Response {
	var r provider.Response
	if acc.text.Len() > 0 {
		r.Content = []provider.Block{{Type: provider.BlockText, Text: acc.text.String()}}
	}
	return r
}

// toolInput makes a tool call's arguments a JSON value. Arguments that are
// not a JSON object — small models produce such, and any model cut off by
// max_tokens — are kept as a JSON string, so the tool fails on them with a
// message the model can act on, and the history still shows what the model
// sent. They go back to the server as {} (see arguments).
func toolInput(args string) json.RawMessage {
	if strings.TrimSpace(args) == "" {
		return json.RawMessage(`{}`)
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal([]byte(args), &obj) == nil && obj != nil {
		return json.RawMessage(args)
	}
	b, _ := json.Marshal(args)
	return b
}

// stopReason maps finish_reason onto the neutral stop reasons. A server
// that says "stop" on a turn with tool calls (Ollama did) is taken to mean
// tool_use: the calls are what the agent has to act on.
func stopReason(finish string, calls bool) string {
	switch finish {
	case "tool_calls", "function_call":
		return provider.StopToolUse
	case "length":
		return provider.StopMaxTokens
	case "stop", "eos", "end_turn", "":
		if calls {
			return provider.StopToolUse
		}
		return provider.StopEndTurn
	}
	return finish
}

// failed is the error a chunk reports, if it reports one: an error object,
// or finish_reason "error" — the server gave up on the reply, which must
// not pass for a finished one. Like any stream error it is retried only
// while nothing has reached the caller.
func (c *Client) failed(ch chunk, acc *accumulator, model string, rec *recorder) *provider.Error {
	switch {
	case ch.Error != nil:
		return c.classify(ch.Error, model, rec)
	case acc.finish == "error":
		return c.core.StreamBroken(model, `the reply ended with finish_reason "error"`)
	}
	return nil
}

// classify sorts an SDK or network error into a provider.Error. The SDK
// error itself is not kept.
func (c *Client) classify(err error, model string, rec *recorder) *provider.Error {
	if !rec.called {
		// The SDK refused the request before sending it: it knows this
		// model cannot be used this way (a reasoning model with tools, a
		// completions-only model).
		e := c.core.Error(model)
		e.Kind = provider.ErrModel
		e.Message = provider.Scrub(err.Error(), c.core.Key)
		return e
	}
	var (
		ae       *goopenai.APIError
		re       *goopenai.RequestError
		typ, msg string
	)
	switch {
	case errors.As(err, &re):
		// An error status without OpenAI's error JSON: a proxy's page, a
		// server's plain text or its own JSON. Checked first: for JSON of
		// another shape the SDK wraps an empty APIError in it.
		msg = bodyMessage(re.Body)
	case errors.As(err, &ae):
		typ, msg = ae.Type, ae.Message
		if code, ok := ae.Code.(string); ok && code != "" {
			typ = code
		}
	default:
		// No answer, or a stream that broke.
		e := c.core.NetError(model, err)
		e.Status = rec.status()
		return e
	}
	return c.core.APIError(model, rec.status(), rec.header(), typ, msg, kind)
}

// bodyMessage finds the explanation in an error body that is not OpenAI's
// error JSON: {"error":"…"} (Ollama's native shape), {"message":"…"}
// (vLLM's), plain text; an HTML page says nothing useful.
func bodyMessage(body []byte) string {
	var v struct {
		Error   any    `json:"error"`
		Message string `json:"message"`
		Detail  any    `json:"detail"`
	}
	if json.Unmarshal(body, &v) == nil {
		for _, m := range []any{v.Error, v.Message, v.Detail} {
			if s, ok := m.(string); ok && s != "" {
				return s
			}
		}
		return ""
	}
	text := strings.TrimSpace(string(body))
	if strings.HasPrefix(text, "<") {
		return ""
	}
	return text
}

// kind maps the error code, or failing that the HTTP status, to a provider
// error kind, and says whether trying again may help.
func kind(code string, status int) (error, bool) {
	switch code {
	case "invalid_api_key", "invalid_authentication":
		return provider.ErrAuth, false
	case "model_not_found":
		return provider.ErrModel, false
	case "rate_limit_exceeded":
		return provider.ErrRateLimited, true
	case "insufficient_quota", "billing_hard_limit_reached", "context_length_exceeded":
		return provider.ErrRequest, false
	}
	return adapter.StatusKind(status)
}

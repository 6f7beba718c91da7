package anthropic

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/latchd/latch/agent/provider"
)

// messagesRequest is the body of POST /v1/messages, with the fields latch
// uses. It is the JSON the official SDK sent for the same request, but for
// a tool without a schema: the SDK left out input_schema, which the API
// requires.
type messagesRequest struct {
	Model     string      `json:"model"`
	MaxTokens int         `json:"max_tokens"`
	System    []textBlock `json:"system,omitempty"`
	Messages  []message   `json:"messages"`
	Tools     []tool      `json:"tools,omitempty"`
	Stream    bool        `json:"stream"`
}

type message struct {
	Role    provider.Role `json:"role"`
	Content []any         `json:"content"` // textBlock, toolUseBlock, toolResultBlock
}

type textBlock struct {
	Type  string        `json:"type"` // "text"
	Text  string        `json:"text"`
	Cache *cacheControl `json:"cache_control,omitempty"`
}

type toolUseBlock struct {
	Type  string          `json:"type"` // "tool_use"
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
	Cache *cacheControl   `json:"cache_control,omitempty"`
}

type toolResultBlock struct {
	Type      string        `json:"type"` // "tool_result"
	ToolUseID string        `json:"tool_use_id"`
	Content   []textBlock   `json:"content,omitempty"`
	IsError   bool          `json:"is_error,omitempty"`
	Cache     *cacheControl `json:"cache_control,omitempty"`
}

type tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
	Cache       *cacheControl   `json:"cache_control,omitempty"`
}

// cacheControl marks a cache breakpoint: the API caches the request up to
// and including the block that carries it (tools, then system, then
// messages), and a later request that starts the same reads it at a tenth
// of the input price and, on most models, without counting it against the
// input-tokens-per-minute limit.
type cacheControl struct {
	Type string `json:"type"`
}

// ephemeral is the API's one cache type: kept five minutes, and five more
// each time it is read.
var ephemeral = &cacheControl{Type: "ephemeral"}

// nothing stands in for a message with nothing to send — no blocks, or
// only blank text: the API refuses a message without content, and leaving
// the message out would put two turns of the other side together, or end
// the request on the assistant's side. "(no answer)" is what the agent
// stores for a reply without content, so the model sees one convention.
var nothing = map[provider.Role]string{
	provider.RoleAssistant: "(no answer)",
	provider.RoleUser:      "(empty message)",
}

// encode turns a neutral request into the body of a streaming Messages
// request.
func encode(req provider.Request, model string) ([]byte, error) {
	p := messagesRequest{
		Model:     model,
		MaxTokens: cmp.Or(req.MaxTokens, DefaultMaxTokens),
		Messages:  make([]message, 0, len(req.Messages)),
		Stream:    true,
	}
	if !blank(req.System) {
		p.System = []textBlock{{Type: "text", Text: req.System}}
	}
	for i, m := range req.Messages {
		if m.Role != provider.RoleUser && m.Role != provider.RoleAssistant {
			return nil, fmt.Errorf("message %d: unknown role %q", i, m.Role)
		}
		blocks, err := encodeBlocks(m.Content)
		if err != nil {
			return nil, fmt.Errorf("message %d: %w", i, err)
		}
		if len(blocks) == 0 {
			blocks = []any{textBlock{Type: "text", Text: nothing[m.Role]}}
		}
		p.Messages = append(p.Messages, message{Role: m.Role, Content: blocks})
	}
	for _, t := range req.Tools {
		schema, err := inputSchema(t)
		if err != nil {
			return nil, err
		}
		p.Tools = append(p.Tools, tool{Name: t.Name, Description: t.Description, InputSchema: schema})
	}
	p.setBreakpoints()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(p); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// setBreakpoints marks where the API may cache the request: the end of
// the tools — or of the system prompt, when there are none — which stays
// the same for the whole session, and the end of the last message, so
// that the next step of the agent, which sends the same history and a
// little more, reads all of it from the cache. That is two of the four
// breakpoints the API allows. A prefix shorter than the model's minimum
// (1,024 tokens or more) is simply not cached.
func (p *messagesRequest) setBreakpoints() {
	switch {
	case len(p.Tools) > 0:
		p.Tools[len(p.Tools)-1].Cache = ephemeral
	case len(p.System) > 0:
		p.System[len(p.System)-1].Cache = ephemeral
	}
	if len(p.Messages) == 0 {
		return
	}
	// Every block encode sends may carry one: no empty text, no thinking.
	blocks := p.Messages[len(p.Messages)-1].Content
	switch b := blocks[len(blocks)-1].(type) {
	case textBlock:
		b.Cache = ephemeral
		blocks[len(blocks)-1] = b
	case toolUseBlock:
		b.Cache = ephemeral
		blocks[len(blocks)-1] = b
	case toolResultBlock:
		b.Cache = ephemeral
		blocks[len(blocks)-1] = b
	}
}

// blank reports whether s has no text the API accepts: it refuses text
// blocks that are empty or only whitespace (400 "text content blocks must
// contain non-whitespace text"). A model can answer with only a line
// break, and a history stored before this check may hold one.
func blank(s string) bool { return strings.TrimSpace(s) == "" }

func encodeBlocks(in []provider.Block) ([]any, error) {
	var out []any
	for j, b := range in {
		switch b.Type {
		case provider.BlockText:
			if !blank(b.Text) {
				out = append(out, textBlock{Type: "text", Text: b.Text})
			}
		case provider.BlockToolUse:
			out = append(out, toolUseBlock{Type: "tool_use", ID: b.ID, Name: b.Name, Input: toolInput(b.Input)})
		case provider.BlockToolResult:
			r := toolResultBlock{Type: "tool_result", ToolUseID: b.ID, IsError: b.IsError}
			if !blank(b.Text) {
				r.Content = []textBlock{{Type: "text", Text: b.Text}}
			}
			out = append(out, r)
		default:
			return nil, fmt.Errorf("block %d: unknown type %q", j, b.Type)
		}
	}
	return out, nil
}

// toolInput is a tool_use input as the API requires it: a JSON object.
// Anything else becomes {} — another adapter may have recorded arguments a
// model got wrong (see the openai package), and refusing them here would
// make the conversation unusable; the tool_result that follows says what
// went wrong.
func toolInput(in json.RawMessage) json.RawMessage {
	var obj map[string]json.RawMessage
	if json.Unmarshal(in, &obj) != nil || obj == nil {
		return json.RawMessage(`{}`)
	}
	return in
}

// inputSchema checks a tool's schema — a JSON object whose type, if given,
// is "object", with required a list of names — and returns it as sent:
// unchanged, with "type": "object" put first if it was missing. No schema
// at all is {"type":"object"}, which the API requires at the least.
func inputSchema(t provider.Tool) (json.RawMessage, error) {
	raw := bytes.TrimSpace(t.Schema)
	if len(raw) == 0 {
		return json.RawMessage(`{"type":"object"}`), nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return nil, fmt.Errorf("tool %s: schema is not a JSON object", t.Name)
	}
	if v, ok := fields["required"]; ok {
		var names []string
		if err := json.Unmarshal(v, &names); err != nil {
			return nil, fmt.Errorf("tool %s: schema required must be a list of names", t.Name)
		}
	}
	v, ok := fields["type"]
	if !ok {
		rest := bytes.TrimSpace(raw[1:]) // after the '{'
		if rest[0] == '}' {
			return json.RawMessage(`{"type":"object"}`), nil
		}
		return append([]byte(`{"type":"object",`), rest...), nil
	}
	var typ string
	if json.Unmarshal(v, &typ) != nil || typ != "object" {
		return nil, fmt.Errorf(`tool %s: schema type must be "object"`, t.Name)
	}
	return raw, nil
}

package anthropic

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"

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
	Type string `json:"type"` // "text"
	Text string `json:"text"`
}

type toolUseBlock struct {
	Type  string          `json:"type"` // "tool_use"
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

type toolResultBlock struct {
	Type      string      `json:"type"` // "tool_result"
	ToolUseID string      `json:"tool_use_id"`
	Content   []textBlock `json:"content,omitempty"`
	IsError   bool        `json:"is_error,omitempty"`
}

type tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
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
	if req.System != "" {
		p.System = []textBlock{{Type: "text", Text: req.System}}
	}
	for i, m := range req.Messages {
		blocks, err := encodeBlocks(m.Content)
		if err != nil {
			return nil, fmt.Errorf("message %d: %w", i, err)
		}
		if len(blocks) == 0 {
			// Only empty text: the API refuses empty text blocks, and a
			// message without content, so the message carries nothing.
			continue
		}
		if m.Role != provider.RoleUser && m.Role != provider.RoleAssistant {
			return nil, fmt.Errorf("message %d: unknown role %q", i, m.Role)
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
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(p); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func encodeBlocks(in []provider.Block) ([]any, error) {
	var out []any
	for j, b := range in {
		switch b.Type {
		case provider.BlockText:
			if b.Text != "" {
				out = append(out, textBlock{Type: "text", Text: b.Text})
			}
		case provider.BlockToolUse:
			out = append(out, toolUseBlock{Type: "tool_use", ID: b.ID, Name: b.Name, Input: toolInput(b.Input)})
		case provider.BlockToolResult:
			r := toolResultBlock{Type: "tool_result", ToolUseID: b.ID, IsError: b.IsError}
			if b.Text != "" {
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

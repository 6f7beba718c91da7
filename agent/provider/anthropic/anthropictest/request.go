package anthropictest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// Request is one request the fake received, whatever became of it.
type Request struct {
	Method, Path string
	Header       http.Header // as received, credentials included
	Body         []byte
	// Params is Body decoded; zero if Body is not a JSON object.
	Params MessagesRequest
}

// MessagesRequest is the body of POST /v1/messages, as far as the fake
// reads it.
type MessagesRequest struct {
	Model     string          `json:"model"`
	MaxTokens int             `json:"max_tokens"`
	Stream    bool            `json:"stream"`
	System    json.RawMessage `json:"system,omitempty"` // a string or a list of text blocks
	Messages  []Message       `json:"messages"`
	Tools     []Tool          `json:"tools,omitempty"`
}

// SystemText is the system prompt, whichever form it was sent in.
func (r MessagesRequest) SystemText() string { return textOf(r.System) }

// Message is one message of the conversation.
type Message struct {
	Role    string    `json:"role"`
	Content []Content `json:"content"`
}

// UnmarshalJSON accepts content as a string, as the API does.
func (m *Message) UnmarshalJSON(b []byte) error {
	var raw struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	m.Role = raw.Role
	var s string
	if json.Unmarshal(raw.Content, &s) == nil {
		m.Content = []Content{{Type: "text", Text: s}}
		return nil
	}
	return json.Unmarshal(raw.Content, &m.Content)
}

// Content is one content block.
type Content struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`    // tool_use
	Name      string          `json:"name,omitempty"`  // tool_use
	Input     json.RawMessage `json:"input,omitempty"` // tool_use
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"` // tool_result: a string or a list of blocks
	IsError   bool            `json:"is_error,omitempty"`
}

// ResultText is a tool_result's content as text.
func (c Content) ResultText() string { return textOf(c.Content) }

// Tool is a tool definition.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// textOf reads a string, or joins the text of a list of blocks.
func textOf(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []Content
	if json.Unmarshal(raw, &blocks) != nil {
		return ""
	}
	var b strings.Builder
	for _, c := range blocks {
		b.WriteString(c.Text)
	}
	return b.String()
}

// validate checks what the real API checks and latch could get wrong,
// with the API's wording.
func validate(r MessagesRequest) *apiError {
	switch {
	case r.Model == "":
		return invalid("model: Field required")
	case r.MaxTokens < 1:
		return invalid("max_tokens: Field required")
	case len(r.Messages) == 0:
		return invalid("messages: at least one message is required")
	}
	for i, m := range r.Messages {
		if m.Role != "user" && m.Role != "assistant" {
			return invalid(fmt.Sprintf("messages.%d.role: Input should be 'user' or 'assistant'", i))
		}
		if len(m.Content) == 0 {
			return invalid(fmt.Sprintf("messages.%d: all messages must have non-empty content except for the optional final assistant message", i))
		}
		if err := validateContent(r.Messages, i); err != nil {
			return err
		}
	}
	for i, t := range r.Tools {
		var schema struct {
			Type string `json:"type"`
		}
		if t.Name == "" {
			return invalid(fmt.Sprintf("tools.%d.custom.name: Field required", i))
		}
		if json.Unmarshal(t.InputSchema, &schema) != nil || schema.Type != "object" {
			return invalid(fmt.Sprintf("tools.%d.custom.input_schema.type: Input should be 'object'", i))
		}
	}
	return nil
}

// validateContent checks the blocks of message i and how its tool calls
// pair with tool results.
func validateContent(msgs []Message, i int) *apiError {
	m := msgs[i]
	seenOther := false
	for j, c := range m.Content {
		switch c.Type {
		case "text":
			if c.Text == "" {
				return invalid("messages: text content blocks must be non-empty")
			}
			seenOther = true
		case "tool_use":
			if m.Role != "assistant" {
				return invalid(fmt.Sprintf("messages.%d.content.%d: tool_use blocks may only appear in assistant messages", i, j))
			}
			var obj map[string]json.RawMessage
			if json.Unmarshal(c.Input, &obj) != nil {
				return invalid(fmt.Sprintf("messages.%d.content.%d.tool_use.input: Input should be a valid dictionary", i, j))
			}
			seenOther = true
		case "tool_result":
			if m.Role != "user" {
				return invalid(fmt.Sprintf("messages.%d.content.%d: tool_result blocks may only appear in user messages", i, j))
			}
			if seenOther {
				return invalid(fmt.Sprintf("messages.%d: tool_result blocks must come first in the content array", i))
			}
			if i == 0 || !hasToolUse(msgs[i-1], c.ToolUseID) {
				return invalid(fmt.Sprintf("messages.%d.content.%d: unexpected `tool_use_id` found in `tool_result` blocks: %s. Each `tool_result` block must have a corresponding `tool_use` block in the previous message.", i, j, c.ToolUseID))
			}
		default:
			return invalid(fmt.Sprintf("messages.%d.content.%d.type: unknown block type %q", i, j, c.Type))
		}
	}
	if m.Role == "assistant" && i+1 < len(msgs) {
		var missing []string
		for _, c := range m.Content {
			if c.Type == "tool_use" && !hasToolResult(msgs[i+1], c.ID) {
				missing = append(missing, c.ID)
			}
		}
		if len(missing) > 0 {
			return invalid(fmt.Sprintf("messages.%d: `tool_use` ids were found without `tool_result` blocks immediately after: %s. Each `tool_use` block must have a corresponding `tool_result` block in the next message.", i, strings.Join(missing, ", ")))
		}
	}
	return nil
}

func hasToolUse(m Message, id string) bool {
	for _, c := range m.Content {
		if c.Type == "tool_use" && c.ID == id {
			return m.Role == "assistant"
		}
	}
	return false
}

func hasToolResult(m Message, id string) bool {
	for _, c := range m.Content {
		if c.Type == "tool_result" && c.ToolUseID == id {
			return true
		}
	}
	return false
}

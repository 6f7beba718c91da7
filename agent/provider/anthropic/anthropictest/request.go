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
	Type         string          `json:"type"`
	Text         string          `json:"text,omitempty"`
	ID           string          `json:"id,omitempty"`    // tool_use
	Name         string          `json:"name,omitempty"`  // tool_use
	Input        json.RawMessage `json:"input,omitempty"` // tool_use
	ToolUseID    string          `json:"tool_use_id,omitempty"`
	Content      json.RawMessage `json:"content,omitempty"` // tool_result: a string or a list of blocks
	IsError      bool            `json:"is_error,omitempty"`
	CacheControl json.RawMessage `json:"cache_control,omitempty"`
}

// ResultText is a tool_result's content as text.
func (c Content) ResultText() string { return textOf(c.Content) }

// Tool is a tool definition.
type Tool struct {
	Name         string          `json:"name"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"input_schema"`
	CacheControl json.RawMessage `json:"cache_control,omitempty"`
}

// textOf reads a string, or joins the text of a list of blocks.
func textOf(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var b strings.Builder
	for _, c := range blocksOf(raw) {
		b.WriteString(c.Text)
	}
	return b.String()
}

// blocksOf reads a list of blocks; nil for a string or anything else.
func blocksOf(raw json.RawMessage) []Content {
	var blocks []Content
	if json.Unmarshal(raw, &blocks) != nil {
		return nil
	}
	return blocks
}

// breakpoint is a cache_control in a request.
type breakpoint struct {
	at    string // "tools.1", "system.0", "messages.2.content.0"
	typ   string // the type of the block that carries it; "tool" for a tool definition
	text  string // a text block's text
	cache json.RawMessage
}

// breakpoints lists the cache_control fields of r in the order the API
// caches: tools, system, messages (tool_result content included).
func (r MessagesRequest) breakpoints() []breakpoint {
	var out []breakpoint
	add := func(at, typ, text string, cache json.RawMessage) {
		if len(cache) > 0 && string(cache) != "null" {
			out = append(out, breakpoint{at: at, typ: typ, text: text, cache: cache})
		}
	}
	for i, t := range r.Tools {
		add(fmt.Sprintf("tools.%d", i), "tool", "", t.CacheControl)
	}
	for i, c := range blocksOf(r.System) {
		add(fmt.Sprintf("system.%d", i), c.Type, c.Text, c.CacheControl)
	}
	for i, m := range r.Messages {
		for j, c := range m.Content {
			at := fmt.Sprintf("messages.%d.content.%d", i, j)
			add(at, c.Type, c.Text, c.CacheControl)
			for k, n := range blocksOf(c.Content) {
				add(fmt.Sprintf("%s.content.%d", at, k), n.Type, n.Text, n.CacheControl)
			}
		}
	}
	return out
}

// Breakpoints says where r has cache_control, in the order the API caches:
// "tools.1", "system.0", "messages.2.content.0".
func (r MessagesRequest) Breakpoints() []string {
	var out []string
	for _, b := range r.breakpoints() {
		out = append(out, b.at)
	}
	return out
}

// cacheable is what may carry cache_control. Thinking blocks may not: they
// are cached only as part of the turn they are in.
var cacheable = map[string]bool{"tool": true, "text": true, "image": true, "document": true, "tool_use": true, "tool_result": true}

// checkCache checks the cache breakpoints of r as the API does: at most
// four, each {"type":"ephemeral"} with an optional ttl of 5m or 1h, and
// only on blocks that can be cached.
func checkCache(r MessagesRequest) *apiError {
	bps := r.breakpoints()
	if len(bps) > 4 {
		return invalid(fmt.Sprintf("A maximum of 4 blocks with cache_control may be provided. Found %d.", len(bps)))
	}
	for _, b := range bps {
		var cc struct {
			Type string  `json:"type"`
			TTL  *string `json:"ttl"`
		}
		switch {
		case !cacheable[b.typ]:
			return invalid(fmt.Sprintf("%s.%s.cache_control: Extra inputs are not permitted", b.at, b.typ))
		case json.Unmarshal(b.cache, &cc) != nil || cc.Type != "ephemeral":
			return invalid(b.at + ".cache_control.type: Input should be 'ephemeral'")
		case cc.TTL != nil && *cc.TTL != "5m" && *cc.TTL != "1h":
			return invalid(b.at + ".cache_control.ttl: Input should be '5m' or '1h'")
		case b.typ == "text" && b.text == "":
			return invalid(b.at + ": cache_control cannot be set for empty text blocks")
		}
	}
	return nil
}

// checkText checks a text block as the API does.
func checkText(where, text string) *apiError {
	switch {
	case text == "":
		return invalid(where + ": text content blocks must be non-empty")
	case strings.TrimSpace(text) == "":
		return invalid(where + ": text content blocks must contain non-whitespace text")
	}
	return nil
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
	if err := checkCache(r); err != nil {
		return err
	}
	for _, c := range blocksOf(r.System) {
		if err := checkText("system", c.Text); err != nil {
			return err
		}
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
			if err := checkText("messages", c.Text); err != nil {
				return err
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
			for _, n := range blocksOf(c.Content) {
				if n.Type != "text" {
					continue
				}
				if err := checkText("messages", n.Text); err != nil {
					return err
				}
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

// Package provider is the neutral face of the language-model providers the
// agent talks to: a conversation goes in, the assistant's next message comes
// back streamed, and every failure is sorted into a few kinds that the agent
// can explain to the chat in one sentence (see Describe).
//
// The adapters live beside it, one per wire protocol: anthropic (the
// Messages API, a small client of our own over net/http) and openai (Chat
// Completions on go-openai, which also covers Ollama, vLLM, llama.cpp and
// OpenRouter). Each has a
// …test package with a loopback fake that speaks the real protocol.
package provider

import (
	"context"
	"encoding/json"
	"strings"
)

// Role says who wrote a Message.
type Role string

// The roles of a conversation. The system prompt is not a message: it is
// Request.System.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
)

// Block types.
const (
	BlockText       = "text"
	BlockToolUse    = "tool_use"
	BlockToolResult = "tool_result"
)

// Stop reasons every adapter maps its provider's own onto. A reason a
// provider has beyond these (Anthropic's "refusal", OpenAI's
// "content_filter") is passed through as the provider spelled it.
const (
	StopEndTurn   = "end_turn"
	StopToolUse   = "tool_use"
	StopMaxTokens = "max_tokens"
)

// Block is one piece of a message.
type Block struct {
	Type    string          // BlockText, BlockToolUse or BlockToolResult
	Text    string          // text, or tool_result content
	ID      string          // tool_use id; for tool_result, the id it answers
	Name    string          // tool name (tool_use)
	Input   json.RawMessage // tool_use arguments (a JSON object)
	IsError bool            // tool_result: the tool failed and Text says why
}

// Message is one turn of the conversation.
type Message struct {
	Role    Role
	Content []Block
}

// Tool is a tool the model may call.
type Tool struct {
	Name, Description string
	Schema            json.RawMessage // JSON Schema of the input; an object schema
}

// Request is one call to the model: the whole conversation so far.
type Request struct {
	Model     string // empty: the adapter's configured model
	System    string // system prompt; empty for none
	Messages  []Message
	Tools     []Tool
	MaxTokens int // 0: the adapter's default
}

// Usage is what a call cost, in tokens, as the provider reported it. Zero
// when the provider did not say.
type Usage struct {
	InputTokens, OutputTokens int
}

// Response is the assistant message a call produced.
type Response struct {
	Content    []Block
	StopReason string // StopEndTurn, StopToolUse, StopMaxTokens, or the provider's own
	Usage      Usage
}

// Text joins the text blocks of r.
func (r Response) Text() string {
	var b strings.Builder
	for _, c := range r.Content {
		if c.Type == BlockText {
			b.WriteString(c.Text)
		}
	}
	return b.String()
}

// ToolUses returns the tool_use blocks of r, in order.
func (r Response) ToolUses() []Block {
	var out []Block
	for _, c := range r.Content {
		if c.Type == BlockToolUse {
			out = append(out, c)
		}
	}
	return out
}

// Provider is a language model the agent can call.
type Provider interface {
	// Name is the adapter's name ("anthropic", "openai"), for logs.
	Name() string
	// Stream sends req and calls onText for each text delta as it arrives,
	// from the calling goroutine; it returns the whole assistant message.
	//
	// A failure is an *Error (match its kind with errors.Is against ErrAuth,
	// ErrModel, ErrRateLimited, ErrUnavailable, ErrRequest), or the context's
	// error when ctx ends first. On error the Response holds the text that
	// had arrived, so a stopped reply can still be kept; tool calls that had
	// not finished arriving are dropped.
	Stream(ctx context.Context, req Request, onText func(string)) (Response, error)
}

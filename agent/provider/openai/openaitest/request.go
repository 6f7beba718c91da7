package openaitest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// Request is one request the fake received, whatever became of it.
type Request struct {
	Method, Path string
	Header       http.Header // as received, credentials included
	Body         []byte
	// Params is Body decoded; zero if Body is not a JSON object.
	Params ChatRequest
}

// Fields lists the top-level fields of the body, sorted: what a test checks
// to see that nothing a compatible server may refuse was sent.
func (r Request) Fields() []string {
	var m map[string]json.RawMessage
	if json.Unmarshal(r.Body, &m) != nil {
		return nil
	}
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// ChatRequest is the body of POST /v1/chat/completions, as far as the fake
// reads it.
type ChatRequest struct {
	Model         string    `json:"model"`
	Messages      []Message `json:"messages"`
	Tools         []Tool    `json:"tools,omitempty"`
	Stream        bool      `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options,omitempty"`
	MaxTokens           int `json:"max_tokens,omitempty"`
	MaxCompletionTokens int `json:"max_completion_tokens,omitempty"`
}

// Message is one message of the conversation.
type Message struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content,omitempty"` // a string, a list of parts, or null
	ToolCalls  []ToolCall      `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
	Name       string          `json:"name,omitempty"`
}

// Text is the message's content as text, whichever form it was sent in.
func (m Message) Text() string {
	if len(m.Content) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(m.Content, &parts) != nil {
		return ""
	}
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

// hasContent reports whether content was sent and is not null.
func (m Message) hasContent() bool {
	return len(m.Content) > 0 && string(m.Content) != "null"
}

// ToolCall is a tool call in an assistant message.
type ToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// Tool is a tool definition.
type Tool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters,omitempty"`
	} `json:"function"`
}

// validate checks what OpenAI checks and latch could get wrong, with
// OpenAI's wording.
func validate(r ChatRequest) *apiError {
	switch {
	case r.Model == "":
		return invalid("", "you must provide a model parameter")
	case len(r.Messages) == 0:
		return invalid("messages", "[] is too short - 'messages'")
	}
	for i, m := range r.Messages {
		switch m.Role {
		case "system", "developer", "user":
			if !m.hasContent() {
				return invalid(fmt.Sprintf("messages.[%d].content", i), "Invalid value for 'content': expected a string, got null.")
			}
		case "assistant":
			if !m.hasContent() && len(m.ToolCalls) == 0 {
				return invalid(fmt.Sprintf("messages.[%d].content", i), "Invalid value for 'content': expected a string, got null.")
			}
			if err := checkArguments(m, i); err != nil {
				return err
			}
			if err := checkAnswered(r.Messages, i); err != nil {
				return err
			}
		case "tool":
			if !m.hasContent() {
				return invalid(fmt.Sprintf("messages.[%d].content", i), "Invalid value for 'content': expected a string, got null.")
			}
			if !answersCall(r.Messages, i) {
				return invalid(fmt.Sprintf("messages.[%d].role", i), "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.")
			}
		default:
			return invalid(fmt.Sprintf("messages.[%d].role", i), fmt.Sprintf("Invalid value: '%s'. Supported values are: 'system', 'assistant', 'user', 'function', 'tool', and 'developer'.", m.Role))
		}
	}
	for i, t := range r.Tools {
		if t.Type != "function" || t.Function.Name == "" {
			return invalid(fmt.Sprintf("tools[%d].function.name", i), "Missing required parameter: 'tools[0].function.name'.")
		}
	}
	return nil
}

// checkArguments checks that the arguments of each tool call of message i
// are a JSON object, as Ollama and vLLM do (OpenAI takes any string): they
// parse the calls of the whole history, so one bad call refuses every
// request that carries it.
func checkArguments(m Message, i int) *apiError {
	for j, c := range m.ToolCalls {
		var obj map[string]json.RawMessage
		if json.Unmarshal([]byte(c.Function.Arguments), &obj) != nil || obj == nil {
			return invalid(fmt.Sprintf("messages.[%d].tool_calls.[%d].function.arguments", i, j), "invalid tool call arguments")
		}
	}
	return nil
}

// checkAnswered checks that the tool messages right after assistant message
// i answer each of its tool calls.
func checkAnswered(msgs []Message, i int) *apiError {
	answered := map[string]bool{}
	for j := i + 1; j < len(msgs) && msgs[j].Role == "tool"; j++ {
		answered[msgs[j].ToolCallID] = true
	}
	var missing []string
	for _, c := range msgs[i].ToolCalls {
		if !answered[c.ID] {
			missing = append(missing, c.ID)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return invalid("messages", "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: "+strings.Join(missing, ", "))
}

// answersCall reports whether tool message i follows, past other tool
// messages, an assistant message with a call of its id.
func answersCall(msgs []Message, i int) bool {
	j := i - 1
	for j >= 0 && msgs[j].Role == "tool" {
		j--
	}
	if j < 0 || msgs[j].Role != "assistant" {
		return false
	}
	for _, c := range msgs[j].ToolCalls {
		if c.ID == msgs[i].ToolCallID {
			return true
		}
	}
	return false
}

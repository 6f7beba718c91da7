package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/latchd/latch/agent/provider"
)

// emptyResult stands in for a tool result without text: Chat Completions
// requires content on a tool message.
const emptyResult = "(no output)"

// errorPrefix marks a failed tool's result: Chat Completions has no is_error.
const errorPrefix = "Error: "

// emptySchema is the parameters of a tool that declares none.
var emptySchema = json.RawMessage(`{"type":"object","properties":{}}`)

// encode turns a neutral request into a Chat Completions request.
func encode(req provider.Request, model string) (goopenai.ChatCompletionRequest, error) {
	cr := goopenai.ChatCompletionRequest{
		Model:         model,
		Stream:        true,
		StreamOptions: &goopenai.StreamOptions{IncludeUsage: true},
	}
	if req.MaxTokens > 0 {
		setMaxTokens(&cr, req.MaxTokens)
	}
	// The history is sent whole on every call, so this slice is sized
	// once: most neutral messages become one Chat Completions message.
	cr.Messages = make([]goopenai.ChatCompletionMessage, 0, len(req.Messages)+1)
	if req.System != "" {
		cr.Messages = append(cr.Messages, goopenai.ChatCompletionMessage{Role: goopenai.ChatMessageRoleSystem, Content: req.System})
	}
	for i, m := range req.Messages {
		var err error
		if cr.Messages, err = appendMessage(cr.Messages, m); err != nil {
			return cr, fmt.Errorf("message %d: %w", i, err)
		}
	}
	for _, t := range req.Tools {
		params := t.Schema
		if len(params) == 0 {
			params = emptySchema
		} else if !json.Valid(params) {
			return cr, fmt.Errorf("tool %s: schema is not JSON", t.Name)
		}
		cr.Tools = append(cr.Tools, goopenai.Tool{
			Type: goopenai.ToolTypeFunction,
			Function: &goopenai.FunctionDefinition{
				Name:        t.Name,
				Description: t.Description,
				Parameters:  params,
			},
		})
	}
	return cr, nil
}

// setMaxTokens sets max_tokens, which every compatible server knows,
// except for the OpenAI reasoning models that refuse it: for them the SDK
// itself insists on max_completion_tokens.
func setMaxTokens(cr *goopenai.ChatCompletionRequest, n int) {
	cr.MaxTokens = n
	err := goopenai.NewReasoningValidator().Validate(*cr)
	if errors.Is(err, goopenai.ErrReasoningModelMaxTokensDeprecated) || errors.Is(err, goopenai.ErrO1MaxTokensDeprecated) {
		cr.MaxTokens, cr.MaxCompletionTokens = 0, n
	}
}

// appendMessage appends one neutral message to out as Chat Completions
// messages. A user message's tool results become "tool" messages, placed
// first: they must directly follow the assistant message that called the
// tools.
func appendMessage(out []goopenai.ChatCompletionMessage, m provider.Message) ([]goopenai.ChatCompletionMessage, error) {
	var (
		one   [1]string // most messages have one text block: no allocation
		texts = one[:0]
		calls []goopenai.ToolCall
	)
	for j, b := range m.Content {
		switch b.Type {
		case provider.BlockText:
			if b.Text != "" {
				texts = append(texts, b.Text)
			}
		case provider.BlockToolUse:
			if m.Role != provider.RoleAssistant {
				return nil, fmt.Errorf("block %d: tool_use in a %s message", j, m.Role)
			}
			calls = append(calls, goopenai.ToolCall{
				ID:       b.ID,
				Type:     goopenai.ToolTypeFunction,
				Function: goopenai.FunctionCall{Name: b.Name, Arguments: arguments(b.Input)},
			})
		case provider.BlockToolResult:
			if m.Role != provider.RoleUser {
				return nil, fmt.Errorf("block %d: tool_result in a %s message", j, m.Role)
			}
			content := b.Text
			if b.IsError {
				content = errorPrefix + content
			}
			if content == "" {
				content = emptyResult
			}
			out = append(out, goopenai.ChatCompletionMessage{Role: goopenai.ChatMessageRoleTool, ToolCallID: b.ID, Content: content})
		default:
			return nil, fmt.Errorf("block %d: unknown type %q", j, b.Type)
		}
	}
	text := strings.Join(texts, "\n\n")
	switch m.Role {
	case provider.RoleUser:
		if text != "" {
			out = append(out, goopenai.ChatCompletionMessage{Role: goopenai.ChatMessageRoleUser, Content: text})
		}
	case provider.RoleAssistant:
		if text != "" || len(calls) > 0 {
			out = append(out, goopenai.ChatCompletionMessage{Role: goopenai.ChatMessageRoleAssistant, Content: text, ToolCalls: calls})
		}
	default:
		return nil, fmt.Errorf("unknown role %q", m.Role)
	}
	return out, nil
}

// arguments is a tool call's input as the arguments string the API wants:
// always a JSON object. An input that is not one holds arguments the model
// got wrong (see toolInput); they go back as {}, because compatible servers
// parse the arguments of every call in the history and refuse the whole
// request when one is not an object (Ollama: 400 "invalid tool call
// arguments", vLLM: 500), which would break every later turn of the
// session. The tool result that follows tells the model its arguments were
// invalid. The raw text is not passed on under some key of our own: the
// model would see a call shape no tool takes, and might copy it.
func arguments(in json.RawMessage) string {
	in = bytes.TrimSpace(in)
	if len(in) == 0 || in[0] != '{' || !json.Valid(in) {
		return "{}"
	}
	return string(in)
}

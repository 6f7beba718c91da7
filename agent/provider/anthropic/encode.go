package anthropic

import (
	"cmp"
	"encoding/json"
	"fmt"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/latchd/latch/agent/provider"
)

// encode turns a neutral request into Messages API parameters.
func encode(req provider.Request, model string) (sdk.MessageNewParams, error) {
	p := sdk.MessageNewParams{
		Model:     model,
		MaxTokens: int64(cmp.Or(req.MaxTokens, DefaultMaxTokens)),
	}
	if req.System != "" {
		p.System = []sdk.TextBlockParam{{Text: req.System}}
	}
	for i, m := range req.Messages {
		blocks, err := encodeBlocks(m.Content)
		if err != nil {
			return p, fmt.Errorf("message %d: %w", i, err)
		}
		if len(blocks) == 0 {
			// Only empty text: the API refuses empty text blocks, and a
			// message without content, so the message carries nothing.
			continue
		}
		switch m.Role {
		case provider.RoleUser:
			p.Messages = append(p.Messages, sdk.NewUserMessage(blocks...))
		case provider.RoleAssistant:
			p.Messages = append(p.Messages, sdk.NewAssistantMessage(blocks...))
		default:
			return p, fmt.Errorf("message %d: unknown role %q", i, m.Role)
		}
	}
	for _, t := range req.Tools {
		tp, err := encodeTool(t)
		if err != nil {
			return p, err
		}
		p.Tools = append(p.Tools, sdk.ToolUnionParam{OfTool: &tp})
	}
	return p, nil
}

func encodeBlocks(in []provider.Block) ([]sdk.ContentBlockParamUnion, error) {
	var out []sdk.ContentBlockParamUnion
	for j, b := range in {
		switch b.Type {
		case provider.BlockText:
			if b.Text != "" {
				out = append(out, sdk.NewTextBlock(b.Text))
			}
		case provider.BlockToolUse:
			out = append(out, sdk.NewToolUseBlock(b.ID, toolInput(b.Input), b.Name))
		case provider.BlockToolResult:
			r := sdk.ToolResultBlockParam{ToolUseID: b.ID}
			if b.Text != "" {
				r.Content = []sdk.ToolResultBlockParamContentUnion{{OfText: &sdk.TextBlockParam{Text: b.Text}}}
			}
			if b.IsError {
				r.IsError = sdk.Bool(true)
			}
			out = append(out, sdk.ContentBlockParamUnion{OfToolResult: &r})
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

// encodeTool maps a tool onto the SDK's ToolParam. The SDK models the
// schema as properties + required + extra fields; the schema is split that
// way so that it reaches the API as given.
func encodeTool(t provider.Tool) (sdk.ToolParam, error) {
	tp := sdk.ToolParam{Name: t.Name}
	if t.Description != "" {
		tp.Description = sdk.String(t.Description)
	}
	if len(t.Schema) == 0 {
		return tp, nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(t.Schema, &fields); err != nil {
		return tp, fmt.Errorf("tool %s: schema is not a JSON object", t.Name)
	}
	extra := map[string]any{}
	for k, v := range fields {
		switch k {
		case "type":
			var typ string
			if json.Unmarshal(v, &typ) != nil || typ != "object" {
				return tp, fmt.Errorf(`tool %s: schema type must be "object"`, t.Name)
			}
		case "properties":
			tp.InputSchema.Properties = v
		case "required":
			if err := json.Unmarshal(v, &tp.InputSchema.Required); err != nil {
				return tp, fmt.Errorf("tool %s: schema required must be a list of names", t.Name)
			}
		default:
			extra[k] = v
		}
	}
	if len(extra) > 0 {
		tp.InputSchema.ExtraFields = extra
	}
	return tp, nil
}

package anthropic

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/latchd/latch/agent/provider"
)

// streamEvent is the data of a Messages stream event, as far as latch
// reads it. One shape serves every event type: each fills its own fields.
// Blocks and deltas stay raw until their type is known, so that a type
// added to the API later, whatever its fields, is skipped.
type streamEvent struct {
	Message *struct {
		Content []json.RawMessage `json:"content"`
		Usage   wireUsage         `json:"usage"`
	} `json:"message"` // message_start
	Index        *int            `json:"index"`         // content_block_*
	ContentBlock json.RawMessage `json:"content_block"` // content_block_start
	Delta        json.RawMessage `json:"delta"`         // content_block_delta, message_delta
	Usage        *wireUsage      `json:"usage"`         // message_delta
	Error        *wireError      `json:"error"`         // error
}

// wireBlock is a text or tool_use block as a stream starts it.
type wireBlock struct {
	Type  string          `json:"type"`
	Text  string          `json:"text"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

// wireDelta is a text_delta, an input_json_delta, or message_delta's
// delta.
type wireDelta struct {
	Type        string  `json:"type"`
	Text        string  `json:"text"`
	PartialJSON string  `json:"partial_json"`
	StopReason  *string `json:"stop_reason"`
}

// typeOf reads the "type" of a JSON object; "" if it has none.
func typeOf(raw []byte) string {
	var t struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(raw, &t)
	return t.Type
}

// wireUsage is the usage object. Every count is a whole-message total; a
// message_delta leaves out the ones it does not update.
type wireUsage struct {
	InputTokens              *int `json:"input_tokens"`
	OutputTokens             *int `json:"output_tokens"`
	CacheCreationInputTokens *int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     *int `json:"cache_read_input_tokens"`
}

// wireError is the error object of an error response or error event.
type wireError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// streamError is an error event: the API gave up on the reply.
type streamError wireError

func (e *streamError) Error() string { return e.Type + ": " + e.Message }

// reply is the assistant message of one stream as it accumulates.
type reply struct {
	started bool
	blocks  []*block // at the API's content block index
	stop    string
	usage   struct{ input, cacheWrite, cacheRead, output int }
}

// block is one content block. Only text and tool_use are kept; other
// types (thinking, server tools — none of which latch asks for) hold their
// index and have their deltas ignored.
type block struct {
	typ      string
	text     strings.Builder
	id, name string
	start    json.RawMessage // tool_use input as content_block_start gave it
	input    []byte          // tool_use input from input_json_delta pieces
}

// apply adds one event to r, passing text deltas to onText. It reports
// whether the message is complete (message_stop). An error event is a
// *streamError; any other error means the stream stopped making sense.
func (r *reply) apply(ev sseEvent, onText func(string)) (done bool, err error) {
	typ := ev.name
	if typ == "" || typ == "message" {
		// No event name (a proxy may drop it): the data says.
		typ = typeOf(ev.data)
	}
	switch typ {
	case "message_start", "content_block_start", "content_block_delta", "content_block_stop",
		"message_delta", "message_stop", "error":
	default:
		// ping, and event types newer than this code.
		return false, nil
	}
	var e streamEvent
	if err := json.Unmarshal(ev.data, &e); err != nil {
		if typ == "error" {
			return false, &streamError{Message: "malformed error event: " + string(ev.data)}
		}
		return false, fmt.Errorf("malformed %s event: %v", typ, err)
	}
	switch typ {
	case "message_start":
		return false, r.start(&e, onText)
	case "content_block_start":
		return false, r.startBlock(&e, onText)
	case "content_block_delta":
		return false, r.delta(&e, onText)
	case "content_block_stop":
		_, err := r.block(e.Index, typ)
		return false, err
	case "message_delta":
		var d wireDelta
		if len(e.Delta) > 0 && json.Unmarshal(e.Delta, &d) != nil {
			return false, errors.New("malformed message_delta event")
		}
		if d.StopReason != nil {
			r.stop = *d.StopReason
		}
		if e.Usage != nil {
			r.addUsage(*e.Usage)
		}
		return false, nil
	case "message_stop":
		return true, nil
	}
	if e.Error == nil {
		return false, &streamError{Message: "error event without an error"}
	}
	return false, (*streamError)(e.Error)
}

func (r *reply) start(e *streamEvent, onText func(string)) error {
	if r.started {
		return errors.New("a second message_start")
	}
	r.started = true
	if e.Message == nil {
		return errors.New("message_start without a message")
	}
	r.addUsage(e.Message.Usage)
	for _, b := range e.Message.Content {
		if err := r.add(b, onText); err != nil {
			return err
		}
	}
	return nil
}

func (r *reply) startBlock(e *streamEvent, onText func(string)) error {
	switch {
	case e.Index == nil || len(e.ContentBlock) == 0:
		return errors.New("content_block_start without an index or a block")
	case *e.Index != len(r.blocks):
		// Blocks start in index order with no gaps.
		return fmt.Errorf("content_block_start for index %d, expected %d", *e.Index, len(r.blocks))
	}
	return r.add(e.ContentBlock, onText)
}

// add appends a block as it starts.
func (r *reply) add(raw json.RawMessage, onText func(string)) error {
	typ := typeOf(raw)
	b := &block{typ: typ}
	if typ == "text" || typ == "tool_use" {
		var w wireBlock
		if err := json.Unmarshal(raw, &w); err != nil {
			return fmt.Errorf("malformed %s block: %v", typ, err)
		}
		b.id, b.name, b.start = w.ID, w.Name, w.Input
		if w.Text != "" {
			b.text.WriteString(w.Text)
			onText(w.Text)
		}
	}
	r.blocks = append(r.blocks, b)
	return nil
}

func (r *reply) delta(e *streamEvent, onText func(string)) error {
	b, err := r.block(e.Index, "content_block_delta")
	if err != nil {
		return err
	}
	typ := typeOf(e.Delta)
	if typ == "" {
		return errors.New("content_block_delta without a delta")
	}
	keep := typ == "text_delta" && b.typ == "text" || typ == "input_json_delta" && b.typ == "tool_use"
	if !keep {
		// thinking_delta, signature_delta, citations_delta, and deltas
		// for block types that are not kept.
		return nil
	}
	var d wireDelta
	if err := json.Unmarshal(e.Delta, &d); err != nil {
		return fmt.Errorf("malformed %s: %v", typ, err)
	}
	if typ == "text_delta" {
		b.text.WriteString(d.Text)
		onText(d.Text)
	} else {
		b.input = append(b.input, d.PartialJSON...)
	}
	return nil
}

// block returns the block an event addresses.
func (r *reply) block(index *int, event string) (*block, error) {
	if index == nil || *index < 0 || *index >= len(r.blocks) {
		i := "none"
		if index != nil {
			i = fmt.Sprint(*index)
		}
		return nil, fmt.Errorf("%s for content block %s, of %d started", event, i, len(r.blocks))
	}
	return r.blocks[*index], nil
}

func (r *reply) addUsage(u wireUsage) {
	set := func(dst *int, v *int) {
		if v != nil {
			*dst = *v
		}
	}
	set(&r.usage.input, u.InputTokens)
	set(&r.usage.cacheWrite, u.CacheCreationInputTokens)
	set(&r.usage.cacheRead, u.CacheReadInputTokens)
	set(&r.usage.output, u.OutputTokens)
}

// complete converts a message whose message_stop has arrived.
func (r *reply) complete() provider.Response {
	resp := provider.Response{
		StopReason: r.stop,
		Usage: provider.Usage{
			// Cached input is billed apart but is input all the same.
			InputTokens:  r.usage.input + r.usage.cacheWrite + r.usage.cacheRead,
			OutputTokens: r.usage.output,
		},
	}
	for _, b := range r.blocks {
		switch b.typ {
		case "text":
			if b.text.Len() > 0 {
				resp.Content = append(resp.Content, provider.Block{Type: provider.BlockText, Text: b.text.String()})
			}
		case "tool_use":
			resp.Content = append(resp.Content, provider.Block{
				Type:  provider.BlockToolUse,
				ID:    b.id,
				Name:  b.name,
				Input: b.toolInput(),
			})
		}
	}
	return resp
}

// toolInput is the input the pieces add up to; {} when there were none
// (a tool without parameters) or they are not JSON.
func (b *block) toolInput() json.RawMessage {
	in := b.input
	if len(in) == 0 {
		in = b.start
	}
	if len(in) == 0 || !json.Valid(in) {
		return json.RawMessage(`{}`)
	}
	return append(json.RawMessage(nil), in...)
}

// partial keeps the text of a message that did not finish: the caller has
// seen it already. Tool calls are dropped, their input may be cut short.
func (r *reply) partial() provider.Response {
	var resp provider.Response
	for _, b := range r.blocks {
		if b.typ == "text" && b.text.Len() > 0 {
			resp.Content = append(resp.Content, provider.Block{Type: provider.BlockText, Text: b.text.String()})
		}
	}
	return resp
}

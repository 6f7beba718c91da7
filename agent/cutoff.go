package agent

import (
	"encoding/json"
	"errors"

	"github.com/latchd/latch/agent/provider"
)

// errCutOff is how the chat sees a call the output limit cut (the model
// is told noteCutOff).
var errCutOff = errors.New("not run: the model's answer reached its output limit while it wrote this call")

// outputCut reports whether a step's answer ended because it reached the
// output limit (OpenAI-compatible servers' "length" is mapped to
// max_tokens by the adapter).
func outputCut(stop string) bool {
	return stop == provider.StopMaxTokens || stop == "model_context_window_exceeded"
}

// cutCalls answers, without running them, the calls of an answer the
// output limit cut that may be incomplete: the last one, which was being
// written when the limit came, and any whose input is not a JSON object.
// The adapters close a cut call as best they can (Anthropic's with {}), so
// running it would run what the model never finished: bash -c "", or a
// write of nothing.
func cutCalls(uses []provider.Block) []provider.Block {
	var out []provider.Block
	for i, u := range uses {
		var obj map[string]json.RawMessage
		if i == len(uses)-1 || json.Unmarshal(u.Input, &obj) != nil || obj == nil {
			out = append(out, provider.Block{Type: provider.BlockToolResult, ID: u.ID, Text: noteCutOff, IsError: true})
		}
	}
	return out
}

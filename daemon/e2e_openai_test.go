package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/latchd/latch/agent/provider/openai/openaitest"
	"github.com/latchd/latch/config"
	"github.com/latchd/latch/gateways/telegram/telegramtest"
)

const openaiKey = "sk-proj-e2e-OPENAIkeyDoNotLeak"

// TestE2EOpenAIProviderTurn: the same agent turn as with Anthropic — a tool
// call approved by button, its result sent back, the answer streamed to the
// chat — against an OpenAI-compatible server (the fake speaks
// /v1/chat/completions with SSE, as OpenAI, Ollama, vLLM and llama.cpp do).
func TestE2EOpenAIProviderTurn(t *testing.T) {
	e := newEnv(t)
	fake := openaitest.New(openaiKey)
	t.Cleanup(fake.Close)
	e.tweak = func(c *config.Config) {
		c.Agent.Provider = "openai"
		c.Agent.APIKey = openaiKey
		c.Agent.BaseURL = fake.URL()
		c.Agent.Model = "gpt-test"
	}
	e.start()
	e.pair()
	fake.Script(
		openaitest.ToolUse("call_1", "bash", `{"command":"echo via-openai > proof.txt"}`),
		openaitest.Text("Wrote proof.txt."),
	)
	e.say(owner, "write the proof file")
	m := e.waitReply(owner.ID, "Allow bash?")
	id := e.approvalFor("Allow bash?")
	e.tg.SendCallback(telegramtest.Private(owner), owner, m.MessageID, "approve:"+id)
	e.waitReply(owner.ID, "Wrote proof.txt.")
	b, err := os.ReadFile(filepath.Join(e.home, "workspace", "proof.txt"))
	if err != nil || string(b) != "via-openai\n" {
		t.Fatalf("proof.txt = %q, %v", b, err)
	}
	reqs := fake.Requests()
	if len(reqs) != 2 {
		t.Fatalf("model requests: %d, want 2", len(reqs))
	}
	// The second request carries the tool call and its result, paired.
	body := string(reqs[1].Body)
	if !strings.Contains(body, `"tool_call_id":"call_1"`) || !strings.Contains(body, "exit 0") && !strings.Contains(body, "via-openai") {
		t.Errorf("second request does not answer call_1 with the result: %s", body)
	}
	if strings.Contains(e.logs.String(), openaiKey) {
		t.Error("model API key in the logs")
	}
}

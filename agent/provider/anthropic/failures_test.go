package anthropic_test

import (
	"errors"
	"testing"

	"github.com/latchd/latch/agent/provider"
	"github.com/latchd/latch/agent/provider/anthropic"
	"github.com/latchd/latch/agent/provider/anthropic/anthropictest"
	"github.com/latchd/latch/agent/provider/internal/adaptertest"
)

// The failures every adapter shares are adaptertest's scenarios (see
// TestScenarios); what is Anthropic's own is here.

// The official SDK reads these by default; the config must be all that
// counts.
func TestEnvironmentIgnored(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-from-env-000000")
	t.Setenv("ANTHROPIC_AUTH_TOKEN", "token-from-env-000000")
	t.Setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:1")
	t.Setenv("ANTHROPIC_CUSTOM_HEADERS", "X-Env-Header: yes")

	c, srv := setup(t, nil)
	srv.Script(anthropictest.Text("ok"))
	if _, err := c.Stream(t.Context(), adaptertest.Ask("hi"), nil); err != nil {
		t.Fatalf("Stream with explicit config: %v", err)
	}
	h := srv.Requests()[0].Header
	if h.Get("X-Api-Key") != testKey || h.Get("Authorization") != "" || h.Get("X-Env-Header") != "" {
		t.Errorf("request headers = %v, want the configured key and nothing from the environment", h)
	}

	// With no key configured, the one in the environment is not used either.
	c2, err := anthropic.New(anthropic.Config{BaseURL: srv.URL(), Model: testModel})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c2.Stream(t.Context(), adaptertest.Ask("hi"), nil); !errors.Is(err, provider.ErrAuth) {
		t.Errorf("err = %v, want ErrAuth: the environment's key must not be sent", err)
	}
}

package tools

import (
	"slices"
	"strings"
	"testing"
)

func TestFilterEnv(t *testing.T) {
	t.Parallel()
	tests := []struct {
		kv       string
		wantKept bool
	}{
		{"ANTHROPIC_API_KEY=a", false},
		{"ANTHROPIC_AUTH_TOKEN=a", false},
		{"OPENAI_API_KEY=a", false},
		{"LATCH_TELEGRAM_TOKEN=a", false},
		{"LATCH_DISCORD_TOKEN=a", false},
		{"LATCH_WEBHOOK_SECRET=a", false},
		{"LATCH_SIGNING_KEY=a", false},
		{"LATCH_SLACK_BOT_TOKEN_FILE=a", false}, // a path to a token still says where it is
		{"latch_telegram_token=a", false},       // odd spelling errs on hiding
		{"LATCH_RUN=0", false},                  // replaced by LATCH_RUN=1
		{"LATCH_HOME=/home/me/.latch", true},
		{"LATCH_LOG_LEVEL=debug", true},
		{"PATH=/usr/bin", true},
		{"HOME=/home/me", true},
		{"GITHUB_TOKEN=a", true},   // the owner's, not latch's
		{"MY_LATCH_TOKEN=a", true}, // not a LATCH_ variable
		{"=odd", true},
	}
	for _, tt := range tests {
		t.Run(tt.kv, func(t *testing.T) {
			t.Parallel()
			got := filterEnv([]string{tt.kv})
			want := []string{"LATCH_RUN=1"}
			if tt.wantKept {
				want = []string{tt.kv, "LATCH_RUN=1"}
			}
			if !slices.Equal(got, want) {
				t.Errorf("got %q, want %q", got, want)
			}
		})
	}
}

func TestSafeEnvReadsProcessEnvironment(t *testing.T) {
	t.Setenv("LATCH_TELEGRAM_TOKEN", "123:abc")
	t.Setenv("OPENAI_API_KEY", "sk-test")
	t.Setenv("LATCH_TOOLS_TEST_PLAIN", "visible")
	t.Setenv("LATCH_RUN", "0")

	env := SafeEnv()
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if name == "LATCH_TELEGRAM_TOKEN" || name == "OPENAI_API_KEY" {
			t.Errorf("SafeEnv kept %s", name)
		}
	}
	if !slices.Contains(env, "LATCH_TOOLS_TEST_PLAIN=visible") {
		t.Error("SafeEnv dropped LATCH_TOOLS_TEST_PLAIN")
	}
	runs := slices.DeleteFunc(slices.Clone(env), func(kv string) bool { return !strings.HasPrefix(kv, "LATCH_RUN=") })
	if !slices.Equal(runs, []string{"LATCH_RUN=1"}) {
		t.Errorf("got LATCH_RUN entries %q, want exactly [LATCH_RUN=1]", runs)
	}
}

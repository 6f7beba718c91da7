package doctor

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/latchd/latch/agent/provider/openai/openaitest"
	"github.com/latchd/latch/config"
	"github.com/latchd/latch/gateways/telegram/telegramtest"
)

// closedURL is an http URL on which nothing listens.
func closedURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

func TestTelegram(t *testing.T) {
	tests := []struct {
		name    string
		token   string
		fault   *telegramtest.Fault
		closed  bool
		status  Status
		detail  []string
		fix     []string
		webhook Status
	}{
		{name: "ok", token: botToken, status: OK, detail: []string{"@latch_test_bot"}, webhook: OK},
		{name: "rejected", token: wrongToken, status: Fail, detail: []string{"rejected the token (401"},
			fix: []string{"@BotFather", config.EnvTelegramToken}, webhook: Skip},
		{name: "unreachable", token: botToken, closed: true, status: Fail, detail: []string{"cannot reach the Bot API", "connection refused"},
			fix: []string{"[telegram] api_url"}, webhook: Skip},
		{name: "busy", token: botToken, fault: &telegramtest.Fault{Status: http.StatusBadGateway}, status: Warn,
			detail: []string{"502"}, webhook: Skip},
		{name: "not a Bot API", token: botToken, fault: &telegramtest.Fault{Body: "<html>proxy login</html>"}, status: Fail,
			detail: []string{"does not answer like the Bot API"}, fix: []string{"[telegram] api_url", config.DefaultTelegramAPIURL}, webhook: Skip},
		{name: "hangup", token: botToken, fault: &telegramtest.Fault{Hangup: true}, status: Fail,
			detail: []string{"cannot reach the Bot API"}, webhook: Skip},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tg := telegramtest.New(botToken)
			defer tg.Close()
			apiURL := tg.URL()
			if tt.closed {
				apiURL = closedURL(t)
			}
			if tt.fault != nil {
				tg.Inject("getMe", *tt.fault)
			}
			f := newFixture(t, tomlConfig("telegram.api_url", apiURL))
			f.env[config.EnvTelegramToken] = tt.token
			f.sys.missing = true
			rep := f.run(t)
			wantCheck(t, rep, "telegram", tt.status, tt.detail, tt.fix)
			wantCheck(t, rep, "webhook", tt.webhook, nil, nil)
		})
	}
}

func TestTelegramNotConfigured(t *testing.T) {
	f := newFixture(t, "")
	f.sys.missing = true
	rep := f.run(t)
	wantCheck(t, rep, "telegram", Skip, []string{"no bot token"}, nil)
	wantCheck(t, rep, "webhook", Skip, nil, nil)
}

func TestTelegramTokenFile(t *testing.T) {
	tg := telegramtest.New(botToken)
	defer tg.Close()
	f := newFixture(t, "")
	file := f.home + "/token"
	writeFile(t, file, wrongToken+"\n", 0o600)
	writeConfig(t, f, tomlConfig("telegram.token_file", file, "telegram.api_url", tg.URL()), 0o600)
	f.sys.missing = true
	rep := f.run(t)
	wantCheck(t, rep, "telegram", Fail, []string{"401"}, []string{"the token file " + file})
}

func TestModel(t *testing.T) {
	served := []string{"claude-opus-4-1", "claude-sonnet-4-5", "claude-haiku-4-5", "claude-3-5-haiku", "claude-3-opus", "claude-sonnet-4-0", "claude-3-7-sonnet"}
	tests := []struct {
		name     string
		provider string
		key      string            // [agent] api_key
		env      map[string]string // more environment
		model    string
		serve    []string // models the fake offers
		closed   bool
		status   Status
		detail   []string
		fix      []string
	}{
		{name: "anthropic ok", provider: "anthropic", key: apiKey, model: "claude-sonnet-4-5", serve: served,
			status: OK, detail: []string{"claude-sonnet-4-5 (Claude Sonnet 4.5)"}},
		{name: "anthropic wrong key", provider: "anthropic", key: wrongKey, model: "claude-sonnet-4-5", serve: served,
			status: Fail, detail: []string{"rejected the API key (401)"}, fix: []string{"[agent] api_key"}},
		{name: "anthropic no key", provider: "anthropic", model: "claude-sonnet-4-5", serve: served,
			status: Fail, detail: []string{"needs an API key"}, fix: []string{"[agent] api_key"}},
		{name: "anthropic key from the environment", provider: "anthropic", env: map[string]string{config.EnvAnthropicAPIKey: wrongKey},
			model: "claude-sonnet-4-5", serve: served,
			status: Fail, detail: []string{"401"}, fix: []string{config.EnvAnthropicAPIKey, "[agent] api_key"}},
		{name: "anthropic unknown model", provider: "anthropic", key: apiKey, model: "claude-sonnet-4-6", serve: served,
			status: Fail, detail: []string{`"claude-sonnet-4-6"`, "it offers claude-sonnet-4-5, claude-sonnet-4-0, ", "(of 7)"},
			fix: []string{"[agent] model"}},
		{name: "anthropic unreachable", provider: "anthropic", key: apiKey, model: "claude-sonnet-4-5", closed: true,
			status: Fail, detail: []string{"cannot reach anthropic", "connection refused"}, fix: []string{"[agent] base_url"}},
		{name: "openai ok", provider: "openai", key: apiKey, model: "gpt-4o-mini", serve: []string{"gpt-4o", "gpt-4o-mini"},
			status: OK, detail: []string{"gpt-4o-mini"}},
		{name: "ollama tag", provider: "openai", key: apiKey, model: "llama3.2", serve: []string{"qwen3:8b", "llama3.2:latest"},
			status: OK, detail: []string{"llama3.2"}},
		{name: "openai unknown model", provider: "openai", key: apiKey, model: "gpt-4o-mni", serve: []string{"o3", "gpt-4.1", "gpt-4o", "gpt-4o-mini"},
			status: Fail, detail: []string{`"gpt-4o-mni"`, "it offers gpt-4o-mini, gpt-4o, gpt-4.1, o3"}, fix: []string{"[agent] model"}},
		{name: "openai lists nothing", provider: "openai", key: apiKey, model: "gpt-4o-mini", serve: []string{},
			status: Warn, detail: []string{"lists no models"}},
		{name: "openai wrong key", provider: "openai", key: wrongKey, model: "gpt-4o-mini", serve: []string{"gpt-4o-mini"},
			status: Fail, detail: []string{"rejected the API key (401)"}, fix: []string{"[agent] api_key"}},
		{name: "openai unreachable", provider: "openai", key: apiKey, model: "gpt-4o-mini", closed: true,
			status: Fail, detail: []string{"cannot reach openai"}, fix: []string{"[agent] base_url"}},
		{name: "none", provider: "none", status: Skip, detail: []string{"provider is none"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := ""
			switch tt.provider {
			case "anthropic":
				base = anthropicModels(t, apiKey, tt.serve...).URL()
			case "openai":
				base = newModelsAPI(t, apiKey, tt.serve...).URL()
			}
			if tt.closed {
				base = closedURL(t)
			}
			f := newFixture(t, tomlConfig("agent.provider", tt.provider, "agent.model", tt.model,
				"agent.base_url", base, "agent.api_key", tt.key))
			for k, v := range tt.env {
				f.env[k] = v
			}
			f.sys.missing = true
			rep := f.run(t)
			wantCheck(t, rep, "model", tt.status, tt.detail, tt.fix)
		})
	}
}

// TestModelIgnoresSDKEnvironment: only the settings latch resolved reach
// the provider. The official SDKs take their key and base URL from the
// process environment.
func TestModelIgnoresSDKEnvironment(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", wrongKey)
	t.Setenv("ANTHROPIC_AUTH_TOKEN", wrongKey)
	t.Setenv("ANTHROPIC_BASE_URL", closedURL(t))
	t.Setenv("OPENAI_API_KEY", wrongKey)
	t.Setenv("OPENAI_BASE_URL", closedURL(t))
	for _, provider := range []string{"anthropic", "openai"} {
		t.Run(provider, func(t *testing.T) {
			base := newModelsAPI(t, apiKey, "the-model").URL()
			if provider == "anthropic" {
				base = anthropicModels(t, apiKey, "the-model").URL()
			}
			f := newFixture(t, tomlConfig("agent.provider", provider, "agent.model", "the-model",
				"agent.base_url", base, "agent.api_key", apiKey))
			f.sys.missing = true
			rep := f.run(t)
			wantCheck(t, rep, "model", OK, []string{"the-model"}, nil)
		})
	}
}

// TestModelServerWithoutList uses openaitest, which, like some local
// servers, serves chat completions but answers 404 for the model list.
func TestModelServerWithoutList(t *testing.T) {
	srv := openaitest.New("")
	defer srv.Close()
	f := newFixture(t, tomlConfig("agent.provider", "openai", "agent.model", "llama3", "agent.base_url", srv.URL()))
	f.sys.missing = true
	rep := f.run(t)
	wantCheck(t, rep, "model", Warn, []string{"does not list its models", `"llama3"`}, nil)
	if !rep.OK {
		t.Errorf("report not OK: %+v", rep.Checks)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 || reqs[0].Method != http.MethodGet || reqs[0].Path != "/v1/models" {
		t.Errorf("requests = %+v, want one GET /v1/models", reqs)
	}
}

func TestService(t *testing.T) {
	tests := []struct {
		name   string
		setup  func(t *testing.T, f *fixture)
		status Status
		detail []string
		fix    []string
		ran    []string
	}{
		{name: "no systemd", setup: func(t *testing.T, f *fixture) { f.sys.missing = true },
			status: Skip, detail: []string{"systemctl not found"}},
		{name: "not installed", setup: func(t *testing.T, f *fixture) {},
			status: Warn, detail: []string{"not installed"}, fix: []string{"latch service install"},
			ran: []string{"systemctl --version"}},
		{name: "user unit, lingering", setup: func(t *testing.T, f *fixture) {
			f.installUnit(t, false, "enabled")
			f.sys.out["loginctl show-user alice -p Linger"] = "Linger=yes\n"
		}, status: OK, detail: []string{"user unit", "enabled", "lingering"},
			ran: []string{"systemctl --user is-enabled latch.service", "loginctl show-user alice -p Linger"}},
		{name: "user unit, no lingering", setup: func(t *testing.T, f *fixture) {
			f.installUnit(t, false, "enabled")
			f.sys.out["loginctl show-user alice -p Linger"] = "Linger=no\n"
		}, status: Warn, detail: []string{"stop when you log out"}, fix: []string{"sudo loginctl enable-linger alice"}},
		{name: "user unit disabled", setup: func(t *testing.T, f *fixture) { f.installUnit(t, false, "disabled") },
			status: Warn, detail: []string{"is disabled"}, fix: []string{"systemctl --user enable --now latch.service"},
			ran: []string{"systemctl --user is-enabled latch.service"}},
		{name: "user unit masked", setup: func(t *testing.T, f *fixture) { f.installUnit(t, false, "masked") },
			status: Warn, detail: []string{"masked"}, fix: []string{"systemctl --user unmask latch.service"}},
		{name: "user manager unreachable", setup: func(t *testing.T, f *fixture) {
			f.installUnit(t, false, "")
			f.sys.code["systemctl --user is-enabled latch.service"] = 1
		}, status: Warn, detail: []string{"could not say"}, fix: []string{"systemctl --user status latch.service"}},
		{name: "system unit", setup: func(t *testing.T, f *fixture) { f.installUnit(t, true, "enabled") },
			status: OK, detail: []string{"system unit", "enabled"}, ran: []string{"systemctl is-enabled latch.service"}},
		{name: "both", setup: func(t *testing.T, f *fixture) {
			f.installUnit(t, true, "enabled")
			f.installUnit(t, false, "enabled")
			f.sys.out["loginctl show-user alice -p Linger"] = "Linger=yes\n"
		}, status: Warn, detail: []string{"both a user and a system unit"}, fix: []string{"latch service uninstall"}},
		{name: "hardened user unit of an older latch", setup: func(t *testing.T, f *fixture) {
			f.installUnit(t, false, "enabled")
			f.sys.out["loginctl show-user alice -p Linger"] = "Linger=yes\n"
			writeUnit(t, f.userUnit, "[Service]\nProtectSystem=full\nProtectKernelTunables=yes\nReadWritePaths=-/sys/fs/cgroup/x\n")
		}, status: Warn, detail: []string{"hardened by an older latch", "cgroup tree"}, fix: []string{"latch service install --harden"}},
		{name: "hardened system unit of an older latch", setup: func(t *testing.T, f *fixture) {
			f.installUnit(t, true, "enabled")
			writeUnit(t, f.sysUnit, "[Service]\nUser=bob\nProtectKernelTunables=yes\n")
		}, status: Warn, detail: []string{"system unit", "hardened by an older latch"},
			fix: []string{"sudo latch service install --system --user bob --harden"}},
		{name: "hardened unit of this latch", setup: func(t *testing.T, f *fixture) {
			f.installUnit(t, true, "enabled")
			writeUnit(t, f.sysUnit, "[Service]\nUser=bob\nProtectKernelTunables=yes\nProtectControlGroups=yes\n")
		}, status: OK, detail: []string{"system unit", "enabled"}},
		{name: "installed, no systemctl", setup: func(t *testing.T, f *fixture) {
			f.installUnit(t, false, "enabled")
			f.sys.missing = true
		}, status: Skip, detail: []string{"systemctl is not found"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, "")
			tt.setup(t, f)
			rep := f.run(t)
			wantCheck(t, rep, "service", tt.status, tt.detail, tt.fix)
			if tt.ran != nil && !slices.Equal(f.sys.ran, tt.ran) {
				t.Errorf("ran %q, want %q", f.sys.ran, tt.ran)
			}
			if !rep.OK {
				t.Errorf("report not OK; the service check never fails: %+v", rep.Checks)
			}
		})
	}
}

// TestTimeouts: a server that never answers costs a check its timeout, not
// the whole doctor.
func TestTimeouts(t *testing.T) {
	tg := telegramtest.New(botToken)
	defer tg.Close()
	tg.Inject("getMe", telegramtest.Fault{Delay: time.Minute})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	defer hang.Close()
	f := newFixture(t, tomlConfig("telegram.api_url", tg.URL(),
		"agent.provider", "anthropic", "agent.base_url", hang.URL, "agent.api_key", apiKey))
	f.env[config.EnvTelegramToken] = botToken
	f.sys.missing = true
	d := f.doctor()
	d.Timeout = 100 * time.Millisecond
	start := time.Now()
	rep := d.Run(t.Context())
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("doctor took %s", took)
	}
	wantCheck(t, rep, "telegram", Fail, []string{"no answer within 100ms"}, nil)
	wantCheck(t, rep, "model", Fail, []string{"no answer within 100ms"}, nil)
	assertNoSecrets(t, rep)
}

// leakyTransport fails every request with an error that repeats the URL and
// the headers, as some proxies and libraries do.
type leakyTransport struct{}

func (leakyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	return nil, fmt.Errorf("refused %s with headers %v", req.URL, req.Header)
}

// TestSecretsScrubbed: whatever an error under a check says, the token and
// the key do not reach the report.
func TestSecretsScrubbed(t *testing.T) {
	for _, provider := range []string{"anthropic", "openai"} {
		t.Run(provider, func(t *testing.T) {
			f := newFixture(t, tomlConfig("telegram.token", botToken, "telegram.api_url", "http://bot.invalid",
				"agent.provider", provider, "agent.base_url", "http://llm.invalid", "agent.api_key", apiKey))
			f.sys.missing = true
			d := f.doctor()
			d.HTTPClient = &http.Client{Transport: leakyTransport{}}
			rep := d.Run(t.Context())
			for _, name := range []string{"telegram", "model"} {
				wantCheck(t, rep, name, Fail, []string{"refused http://", "[redacted]"}, nil)
			}
			assertNoSecrets(t, rep)
		})
	}
}

// TestWebhookErrorWithoutDescription: an error answer without a
// description to getWebhookInfo used to leave nothing after "could not
// read the webhook setting:".
func TestWebhookErrorWithoutDescription(t *testing.T) {
	tg := telegramtest.New(botToken)
	defer tg.Close()
	tg.Inject("getWebhookInfo", telegramtest.Fault{Status: http.StatusBadGateway, Body: `{"ok":false,"error_code":502}`})
	f := newFixture(t, tomlConfig("telegram.api_url", tg.URL()))
	f.env[config.EnvTelegramToken] = botToken
	f.sys.missing = true
	rep := f.run(t)
	wantCheck(t, rep, "webhook", Warn, []string{"could not read the webhook setting: the Bot API answered error 502 without a description"}, nil)
}

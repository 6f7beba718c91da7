package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// testWebhookSecret looks like one latch init writes.
const testWebhookSecret = "Zq3vX9-kLm2_Pd8Rt5Wn1Bc6Hf0Js4Gy7AeUoIiKsQ"

func TestLoadWebhook(t *testing.T) {
	type file = cfgFile
	tg := func(lines ...string) *file {
		return &file{content: "[telegram]\n" + strings.Join(lines, "\n") + "\n", mode: 0o600}
	}
	secret := `webhook_secret = "` + testWebhookSecret + `"`
	runLoadTests(t, []loadCase{
		{
			name:   "webhook mode",
			config: tg(`webhook_url = "https://bot.example.org/tg/hook"`, `webhook_listen = "127.0.0.1:9000"`, secret),
			want: func(c *Config) {
				c.Telegram.WebhookURL = "https://bot.example.org/tg/hook"
				c.Telegram.WebhookListen = "127.0.0.1:9000"
				c.Telegram.WebhookSecret = testWebhookSecret
			},
		},
		{
			name:   "allowed ports",
			config: tg(`webhook_url = "https://bot.example.org:8443/"`, secret),
			want: func(c *Config) {
				c.Telegram.WebhookURL, c.Telegram.WebhookSecret = "https://bot.example.org:8443/", testWebhookSecret
			},
		},
		{
			name:   "plain http on loopback",
			config: tg(`webhook_url = "http://127.0.0.1:18080/hook"`, `webhook_listen = ":18080"`, secret),
			want: func(c *Config) {
				c.Telegram.WebhookURL, c.Telegram.WebhookListen = "http://127.0.0.1:18080/hook", ":18080"
				c.Telegram.WebhookSecret = testWebhookSecret
			},
		},
		{
			name:   "a secret alone is fine (latch init writes one)",
			config: tg(secret),
			want:   func(c *Config) { c.Telegram.WebhookSecret = testWebhookSecret },
		},
		{
			name:    "secret required",
			config:  tg(`webhook_url = "https://bot.example.org/hook"`),
			wantErr: []string{"telegram.webhook_secret: is required when webhook_url is set", "latch init"},
		},
		{
			name:    "plain http elsewhere",
			config:  tg(`webhook_url = "http://bot.example.org/hook"`, secret),
			wantErr: []string{"telegram.webhook_url", "must be https://"},
		},
		{
			name:    "port Telegram does not deliver to",
			config:  tg(`webhook_url = "https://bot.example.org:9443/hook"`, secret),
			wantErr: []string{"telegram.webhook_url", "ports 443, 80, 88 and 8443"},
		},
		{
			name:    "query",
			config:  tg(`webhook_url = "https://bot.example.org/hook?key=`+testWebhookSecret+`"`, secret),
			wantErr: []string{"must not have a query"},
			notErr:  []string{testWebhookSecret},
		},
		{
			name:    "user info",
			config:  tg(`webhook_url = "https://u:`+testWebhookSecret+`@bot.example.org/hook"`, secret),
			wantErr: []string{"must not contain a user name or password"},
			notErr:  []string{testWebhookSecret},
		},
		{
			name:    "relative",
			config:  tg(`webhook_url = "/hook"`, secret),
			wantErr: []string{"must be an absolute https:// URL"},
		},
		{
			name:    "secret alphabet",
			config:  tg(`webhook_url = "https://bot.example.org/hook"`, `webhook_secret = "`+testWebhookSecret+`:x"`),
			wantErr: []string{"telegram.webhook_secret: must be 1 to 256 characters", "not shown"},
		},
		{
			name:    "secret too long",
			config:  tg(`webhook_secret = "` + strings.Repeat("a", 257) + `"`),
			wantErr: []string{"telegram.webhook_secret: must be 1 to 256"},
		},
		{
			name:    "listen without port",
			config:  tg(`webhook_listen = "127.0.0.1"`),
			wantErr: []string{"telegram.webhook_listen", "not host:port"},
		},
		{
			name:    "listen port",
			config:  tg(`webhook_listen = "127.0.0.1:http"`),
			wantErr: []string{"telegram.webhook_listen", "port must be a number"},
		},
		{
			name:    "readable config with the secret",
			config:  &file{content: "[telegram]\n" + secret + "\n", mode: 0o644},
			wantErr: []string{"holds telegram.webhook_secret", "chmod 600"},
		},
	})
}

func TestWebhookSecretNeverPrinted(t *testing.T) {
	tc := TelegramConfig{WebhookURL: "https://bot.example.org/hook", WebhookListen: "127.0.0.1:8443", WebhookSecret: testWebhookSecret}
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("x", "tg", tc)
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("x", "tg", tc)
	js, _ := json.Marshal(Config{Telegram: tc})
	outs := []string{buf.String(), string(js), fmt.Sprintf("%v %+v %#v %s", tc, tc, tc, tc)}
	for _, out := range outs {
		if strings.Contains(out, testWebhookSecret[4:20]) {
			t.Errorf("output shows the webhook secret: %s", out)
		}
	}
	if !strings.Contains(buf.String(), "tg.webhook_secret=[redacted]") || !strings.Contains(tc.String(), `WebhookURL:"https://bot.example.org/hook"`) {
		t.Errorf("want the secret redacted and the URL shown:\n%s\n%s", buf.String(), tc)
	}
}

func TestNewWebhookSecret(t *testing.T) {
	a, b := NewWebhookSecret(), NewWebhookSecret()
	if len(a) != 43 || !validWebhookSecret(a) || a == b {
		t.Errorf("NewWebhookSecret = %q, %q; want two different 43-character secrets Telegram accepts", a, b)
	}
}

func TestEnsureWebhookSecret(t *testing.T) {
	const hook = "[telegram]\n# mine\nwebhook_url = \"https://bot.example.org/hook\"\n\n[agent]\nbash_timeout = \"5m\"\n"
	tests := []struct {
		name    string
		content string // "" = no config.toml
		mode    os.FileMode
		added   bool
		wantErr []string
	}{
		{name: "no config"},
		{name: "polling", content: "[telegram]\nallow_groups = true\n", mode: 0o600},
		{name: "webhook without secret", content: hook, mode: 0o600, added: true},
		{name: "header with comment", content: "[ telegram ] # bot\r\nwebhook_url = \"https://b.example/h\"\n", mode: 0o400, added: true},
		{name: "has one", content: strings.Replace(hook, "# mine", `webhook_secret = "x"`, 1), mode: 0o600},
		{name: "open to others", content: hook, mode: 0o640, wantErr: []string{"mode 0640", "chmod 600"}},
		{name: "dotted keys", content: "telegram.webhook_url = \"https://b.example/h\"\n", mode: 0o600,
			wantErr: []string{"no [telegram] header line"}},
		{name: "header inside a string", content: "telegram = { webhook_url = \"https://b.example/h\" }\n" +
			"[agent]\nmodel = \"\"\"\n[telegram]\n\"\"\"\n", mode: 0o600, wantErr: []string{"no [telegram] header line"}},
		{name: "does not parse", content: hook + "oops\n", mode: 0o600},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHome(t)
			path := filepath.Join(h, "config.toml")
			if tt.content != "" {
				writeFile(t, path, tt.content, tt.mode)
			}
			added, err := EnsureWebhookSecret(h)
			checkErr(t, err, tt.wantErr)
			if added != tt.added {
				t.Fatalf("added = %t, want %t", added, tt.added)
			}
			if tt.content == "" {
				return
			}
			got, rerr := os.ReadFile(path)
			if rerr != nil {
				t.Fatal(rerr)
			}
			if m := mode(t, path); m != tt.mode {
				t.Errorf("mode %04o after, want %04o kept", m, tt.mode)
			}
			if !tt.added {
				if string(got) != tt.content {
					t.Errorf("config.toml changed:\n%s", got)
				}
				return
			}
			// The only change is the new lines under the header.
			head, rest, _ := strings.Cut(tt.content, "\n")
			added2, tail, _ := strings.Cut(strings.TrimPrefix(string(got), head+"\n"), "webhook_secret = ")
			secret, after, _ := strings.Cut(tail, "\n")
			if !strings.HasPrefix(string(got), head+"\n") || after != rest || !strings.HasPrefix(added2, "# Added by latch init") {
				t.Errorf("config.toml after:\n%s\nwant the original with the secret under its header", got)
			}
			if os.Chmod(path, 0o600) != nil {
				t.Fatal("chmod")
			}
			cfg, err := testLoader(t, nil).Load(h)
			if err != nil || `"`+cfg.Telegram.WebhookSecret+`"` != secret || len(cfg.Telegram.WebhookSecret) != 43 {
				t.Errorf("Load after = %v (secret %d chars)", err, len(cfg.Telegram.WebhookSecret))
			}
			if again, err := EnsureWebhookSecret(h); again || err != nil {
				t.Errorf("second EnsureWebhookSecret = %t, %v; want nothing to do", again, err)
			}
			entries, _ := os.ReadDir(h)
			if len(entries) != 1 {
				t.Errorf("home holds %d entries, want only config.toml (no temporary file left)", len(entries))
			}
		})
	}
}

func TestEnsureWebhookSecretInsecureIsErrInsecure(t *testing.T) {
	h := newHome(t)
	writeFile(t, filepath.Join(h, "config.toml"), "[telegram]\nwebhook_url = \"https://b.example/h\"\n", 0o604)
	if _, err := EnsureWebhookSecret(h); !errors.Is(err, ErrInsecure) {
		t.Errorf("got %v, want ErrInsecure", err)
	}
}

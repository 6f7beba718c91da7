package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func TestHomeDir(t *testing.T) {
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		env     string // LATCH_HOME
		noHome  bool   // the user's home directory cannot be found
		want    string // $USER is the user's home
		wantErr string
	}{
		{name: "default", want: "$USER/.latch"},
		{name: "absolute", env: "/srv/latch/", want: "/srv/latch"},
		{name: "relative", env: "state/latch", want: filepath.Join(cwd, "state/latch")},
		{name: "tilde", env: "~/.config/latch", want: "$USER/.config/latch"},
		{name: "tilde alone", env: "~", want: "$USER"},
		{name: "tilde user", env: "~bob/latch", wantErr: `LATCH_HOME: "~bob/latch": only ~/ is supported`},
		{name: "no user home", noHome: true, wantErr: "find your home directory: no HOME (or set LATCH_HOME)"},
		{name: "no user home but LATCH_HOME", env: "/srv/latch", noHome: true, want: "/srv/latch"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			userHome := t.TempDir()
			l := Loader{
				Getenv: func(k string) string {
					if k == EnvHome {
						return tt.env
					}
					return ""
				},
				UserHomeDir: func() (string, error) {
					if tt.noHome {
						return "", errors.New("no HOME")
					}
					return userHome, nil
				},
			}
			got, err := l.HomeDir()
			if tt.wantErr != "" {
				checkErr(t, err, []string{tt.wantErr})
				return
			}
			checkErr(t, err, nil)
			if want := strings.ReplaceAll(tt.want, "$USER", userHome); got != want {
				t.Errorf("HomeDir() = %q, want %q", got, want)
			}
		})
	}
}

func TestPaths(t *testing.T) {
	if got, want := SocketPath("/h"), "/h/latch.sock"; got != want {
		t.Errorf("SocketPath = %q, want %q", got, want)
	}
	if got, want := DBPath("/h"), "/h/latch.db"; got != want {
		t.Errorf("DBPath = %q, want %q", got, want)
	}
}

func TestEnabled(t *testing.T) {
	if (TelegramConfig{}).Enabled() {
		t.Error("Enabled() without a token = true, want false")
	}
	if !(TelegramConfig{Token: "1:a"}).Enabled() {
		t.Error("Enabled() with a token = false, want true")
	}
}

// TestConfigPrintingHidesToken covers the ways a config typically ends up in
// a log: fmt verbs and slog's text and JSON handlers. The API key is held to
// the same rule as the token.
func TestConfigPrintingHidesToken(t *testing.T) {
	agent := testDefaults("/h").Agent
	agent.Provider, agent.APIKey, agent.APIKeySource = "openai", testOpenAIKey, SourceAPIKey
	agent.BaseURL = "https://gw.example/v1"
	cfg := &Config{Home: "/h", Telegram: TelegramConfig{Token: testToken, TokenSource: SourceEnv, APIURL: "https://x"},
		Agent: agent}
	var outs []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
		outs = append(outs, fmt.Sprintf(verb, cfg), fmt.Sprintf(verb, *cfg), fmt.Sprintf(verb, cfg.Telegram),
			fmt.Sprintf(verb, cfg.Agent), fmt.Sprintf(verb, &cfg.Agent))
	}
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("x", "cfg", cfg, "tg", cfg.Telegram, "ag", cfg.Agent)
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("x", "cfg", cfg, "tg", cfg.Telegram, "ag", cfg.Agent)
	for _, want := range []string{
		"tg.token=[redacted] tg.token_source=LATCH_TELEGRAM_TOKEN",
		"ag.api_key=[redacted] ag.api_key_source=agent.api_key",
		"ag.base_url=https://gw.example/v1",
		"ag.permissions.bash=ask",
		`"api_key":"[redacted]"`,
	} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("slog output lacks %s:\n%s", want, buf.String())
		}
	}
	outs = append(outs, buf.String())
	js, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	outs = append(outs, string(js))
	for _, out := range outs {
		for _, secret := range []string{testToken[10:], testOpenAIKey[9:]} {
			if strings.Contains(out, secret) {
				t.Errorf("output contains a secret (%.4s…): %s", secret, out)
			}
		}
	}
	if s := cfg.Telegram.String(); !strings.Contains(s, "Token:[redacted]") || !strings.Contains(s, `APIURL:"https://x"`) {
		t.Errorf("String() = %s, want the token redacted and the rest shown", s)
	}
	if s := cfg.Agent.String(); !strings.Contains(s, "APIKey:[redacted]") || !strings.Contains(s, `Provider:"openai"`) ||
		!strings.Contains(s, "Permissions:map[bash:ask") {
		t.Errorf("AgentConfig.String() = %s, want the key redacted and the rest shown", s)
	}
	if s := (AgentConfig{}).String(); !strings.Contains(s, "APIKey:unset") {
		t.Errorf("AgentConfig{}.String() = %s, want APIKey:unset", s)
	}
}

// TestTemplateDocumentsEveryKey checks that the config.toml Init writes
// names every key of the schema with its default value, commented out.
func TestTemplateDocumentsEveryKey(t *testing.T) {
	var tagged []string
	var walk func(prefix string, typ reflect.Type)
	walk = func(prefix string, typ reflect.Type) {
		for f := range typ.Fields() {
			k := prefix + f.Tag.Get("toml")
			if k == "mcp" {
				// [mcp] holds arrays of tables and keys of the owner's
				// choosing: knownMCPKey checks it; README documents it.
				continue
			}
			tagged = append(tagged, k)
			switch f.Type.Kind() {
			case reflect.Struct:
				walk(k+".", f.Type)
			case reflect.Map: // agent.permissions, keyed by tool
				for tool := range DefaultPermissions() {
					tagged = append(tagged, k+"."+tool)
				}
			}
		}
	}
	walk("", reflect.TypeFor[fileConfig]())
	slices.Sort(tagged)
	schema := slices.Sorted(slices.Values(allKeys()))
	if !slices.Equal(tagged, schema) {
		t.Fatalf("schemaKeys %q do not match fileConfig %q", schema, tagged)
	}

	// Uncomment every "# [table]" and "# key = value" line.
	setting := regexp.MustCompile(`(?m)^# ([a-z_]+ = .*)$`)
	header := regexp.MustCompile(`(?m)^# (\[[a-z_.]+\])$`)
	var inTemplate []string
	table := ""
	for line := range strings.Lines(string(template)) {
		line = strings.TrimSpace(line)
		if m := header.FindStringSubmatch(line); m != nil {
			table = strings.Trim(m[1], "[]")
			inTemplate = append(inTemplate, table)
		} else if m := setting.FindStringSubmatch(line); m != nil {
			inTemplate = append(inTemplate, table+"."+strings.Fields(m[1])[0])
		} else if line != "" && !strings.HasPrefix(line, "#") {
			t.Errorf("template line %q is neither a table, a comment nor blank", line)
		}
	}
	slices.Sort(inTemplate)
	if !slices.Equal(inTemplate, schema) {
		t.Errorf("template documents %q, want every key of %q", inTemplate, schema)
	}

	// With every line uncommented the template still means the defaults.
	h := newHome(t)
	uncommented := header.ReplaceAllString(setting.ReplaceAllString(string(template), "$1"), "$1")
	writeFile(t, filepath.Join(h, "config.toml"), uncommented, 0o600)
	got, err := testLoader(t, nil).Load(h)
	checkErr(t, err, nil)
	want, err := testLoader(t, nil).Load(newHome(t))
	checkErr(t, err, nil)
	want.Home, want.Path = got.Home, got.Path
	want.Agent.Workspace = filepath.Join(h, "workspace")
	if !reflect.DeepEqual(got, want) {
		t.Errorf("uncommented template loads as\n%+v\nwant the defaults\n%+v", got, want)
	}
	if !strings.Contains(string(template), "0600") {
		t.Error("template lacks the note about mode 0600")
	}
}

package doctor

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/latchd/latch/config"
	"github.com/latchd/latch/control"
	"github.com/latchd/latch/gateways/telegram/telegramtest"
)

func TestHealthyHome(t *testing.T) {
	tg := telegramtest.New(botToken)
	defer tg.Close()
	models := anthropicModels(t, apiKey, "claude-opus-4-1", "claude-sonnet-4-5")
	f := newFixture(t, tomlConfig(
		"telegram.token", botToken, "telegram.api_url", tg.URL(),
		"agent.provider", "anthropic", "agent.model", "claude-sonnet-4-5",
		"agent.base_url", models.URL(), "agent.api_key", apiKey))
	f.createDB(t)
	f.installUnit(t, false, "enabled")
	f.sys.out["loginctl show-user alice -p Linger"] = "Linger=yes\n"

	rep := f.run(t)
	if got := names(rep); !slices.Equal(got, allChecks) {
		t.Errorf("checks %v, want %v", got, allChecks)
	}
	if !rep.OK {
		t.Errorf("report not OK: %+v", rep.Checks)
	}
	want := map[string]Status{"daemon": Warn, "mcp": Skip, "slack": Skip, "matrix": Skip} // no daemon runs in this test, no MCP server, Slack app or Matrix account is configured
	for _, c := range rep.Checks {
		if w := cmpOr(want[c.Name], OK); c.Status != w {
			t.Errorf("%s: %s (%q, fix %q), want %s", c.Name, c.Status, c.Detail, c.Fix, w)
		}
	}
	wantCheck(t, rep, "home", OK, []string{f.home, "0700"}, nil)
	wantCheck(t, rep, "database", OK, []string{"consistent"}, nil)
	wantCheck(t, rep, "daemon", Warn, []string{"not running"}, []string{"latch run", "latch service install"})
	wantCheck(t, rep, "telegram", OK, []string{"@latch_test_bot"}, nil)
	wantCheck(t, rep, "model", OK, []string{"claude-sonnet-4-5", models.URL()}, nil)
	wantCheck(t, rep, "service", OK, []string{f.userUnit, "enabled", "lingering"}, nil)
	if got := tg.Calls("getMe"); len(got) != 1 {
		t.Errorf("getMe calls = %d, want 1", len(got))
	}
	if got := modelPaths(models); !slices.Equal(got, []string{"/v1/models/claude-sonnet-4-5"}) {
		t.Errorf("model requests = %v, want only GET /v1/models/claude-sonnet-4-5", got)
	}
}

func cmpOr(s, def Status) Status {
	if s == "" {
		return def
	}
	return s
}

// TestBrokenHome puts several problems in one home: each is named with its
// fix, the checks after it still run, and the report is not OK.
func TestBrokenHome(t *testing.T) {
	tg := telegramtest.New(botToken)
	defer tg.Close()
	models := anthropicModels(t, apiKey, "claude-opus-4-1", "claude-sonnet-4-5", "claude-haiku-4-5")
	blocker := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, tomlConfig(
		"telegram.token", wrongToken, "telegram.api_url", tg.URL(),
		"agent.workspace", filepath.Join(blocker, "ws"),
		"agent.provider", "anthropic", "agent.model", "claude-sonnet-9",
		"agent.base_url", models.URL(), "agent.api_key", apiKey))
	if err := os.Chmod(f.home, 0o755); err != nil {
		t.Fatal(err)
	}
	f.sys.missing = true

	rep := f.run(t)
	if rep.OK {
		t.Error("report OK, want not OK")
	}
	if got := names(rep); !slices.Equal(got, allChecks) {
		t.Errorf("checks %v, want %v", got, allChecks)
	}
	wantCheck(t, rep, "home", Fail, []string{f.home, "0755"}, []string{"chmod 700 " + f.home})
	wantCheck(t, rep, "config", OK, nil, nil)
	wantCheck(t, rep, "telegram", Fail, []string{"rejected the token", "401"},
		[]string{"@BotFather", "[telegram] token in " + filepath.Join(f.home, "config.toml")})
	wantCheck(t, rep, "webhook", Skip, nil, nil)
	wantCheck(t, rep, "workspace", Fail, []string{"cannot be created", blocker + " is not a directory"},
		[]string{"[agent] workspace"})
	wantCheck(t, rep, "model", Fail, []string{`"claude-sonnet-9"`, "claude-sonnet-4-5, claude-opus-4-1, claude-haiku-4-5"},
		[]string{"[agent] model in " + filepath.Join(f.home, "config.toml")})
	wantCheck(t, rep, "service", Skip, []string{"systemctl not found"}, nil)
}

func TestReportJSON(t *testing.T) {
	f := newFixture(t, "")
	f.sys.missing = true
	out, err := json.Marshal(f.run(t))
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(out, &raw); err != nil {
		t.Fatal(err)
	}
	if keys := sortedKeys(raw); !slices.Equal(keys, []string{"checks", "ok"}) {
		t.Errorf("top-level keys %v, want [checks ok]", keys)
	}
	var checks []map[string]any
	if err := json.Unmarshal(raw["checks"], &checks); err != nil {
		t.Fatal(err)
	}
	for _, c := range checks {
		if keys := sortedKeys(c); !slices.Equal(keys, []string{"detail", "fix", "name", "status"}) {
			t.Errorf("check keys %v, want [detail fix name status]", keys)
		}
		if s, _ := c["status"].(string); !slices.Contains([]string{"ok", "fail", "warn", "skip"}, s) {
			t.Errorf("check %v: status %q", c["name"], s)
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func TestHomeAndFiles(t *testing.T) {
	tests := []struct {
		name   string
		setup  func(t *testing.T, f *fixture)
		check  string
		status Status
		detail []string
		fix    func(f *fixture) []string
	}{
		{"home missing", func(t *testing.T, f *fixture) { os.RemoveAll(f.home) },
			"home", Fail, []string{"does not exist"}, func(*fixture) []string { return []string{"latch init"} }},
		{"home is a file", func(t *testing.T, f *fixture) {
			os.RemoveAll(f.home)
			os.WriteFile(f.home, nil, 0o600)
		}, "home", Fail, []string{"not a directory"}, func(f *fixture) []string { return []string{"move " + f.home + " aside"} }},
		{"config syntax", func(t *testing.T, f *fixture) { writeConfig(t, f, "[telegram\n", 0o600) },
			"config", Fail, []string{"line 2"}, func(f *fixture) []string { return []string{"edit " + configPath(f)} }},
		{"config exposes the token", func(t *testing.T, f *fixture) {
			writeConfig(t, f, tomlConfig("telegram.token", botToken), 0o644)
		}, "config", Fail, []string{"open to other users"}, func(f *fixture) []string { return []string{"chmod 600 " + configPath(f)} }},
		{"token pasted without quotes", func(t *testing.T, f *fixture) {
			writeConfig(t, f, "[telegram]\ntoken = "+botToken+"\n", 0o600)
		}, "config", Fail, []string{"double quotes"}, func(f *fixture) []string { return []string{"edit " + configPath(f)} }},
		{"two config errors, one line", func(t *testing.T, f *fixture) {
			writeConfig(t, f, tomlConfig("agent.provider", "anthropc", "agent.bash_timeout", "forever"), 0o600)
		}, "config", Fail, []string{"agent.provider", "; ", "agent.bash_timeout"}, func(f *fixture) []string { return []string{"edit " + configPath(f)} }},
		{"bad environment", func(t *testing.T, f *fixture) { f.env[config.EnvTelegramAPIURL] = "ftp://x" },
			"config", Fail, []string{config.EnvTelegramAPIURL}, func(*fixture) []string { return []string{"unset " + config.EnvTelegramAPIURL} }},
		{"no config.toml", func(t *testing.T, f *fixture) { os.Remove(configPath(f)) },
			"config", Warn, []string{"does not exist"}, func(*fixture) []string { return []string{"latch init"} }},
		{"secret missing", func(t *testing.T, f *fixture) { os.Remove(filepath.Join(f.home, "secret")) },
			"secret", Fail, []string{"does not exist"}, func(*fixture) []string { return []string{"latch init"} }},
		{"secret open", func(t *testing.T, f *fixture) { os.Chmod(filepath.Join(f.home, "secret"), 0o640) },
			"secret", Fail, []string{"open to other users"}, func(f *fixture) []string { return []string{"chmod 600 " + filepath.Join(f.home, "secret")} }},
		{"secret short", func(t *testing.T, f *fixture) { os.WriteFile(filepath.Join(f.home, "secret"), []byte("short"), 0o600) },
			"secret", Fail, []string{"holds 5 bytes"}, func(f *fixture) []string { return []string{"latch init"} }},
		{"workspace missing", func(t *testing.T, f *fixture) { os.RemoveAll(filepath.Join(f.home, "workspace")) },
			"workspace", OK, []string{"latch run creates it"}, nil},
		{"workspace is a file", func(t *testing.T, f *fixture) {
			ws := filepath.Join(f.home, "workspace")
			os.RemoveAll(ws)
			os.WriteFile(ws, nil, 0o600)
		}, "workspace", Fail, []string{"not a directory"}, func(f *fixture) []string { return []string{"[agent] workspace in " + configPath(f)} }},
		{"database missing", func(t *testing.T, f *fixture) {}, "database", Skip, []string{"latch run creates it"}, nil},
		{"database garbage", func(t *testing.T, f *fixture) {
			os.WriteFile(config.DBPath(f.home), []byte(strings.Repeat("not bbolt ", 1000)), 0o600)
		}, "database", Fail, []string{"latch.db"}, func(f *fixture) []string { return []string{"mv " + config.DBPath(f.home)} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, "")
			f.sys.missing = true
			tt.setup(t, f)
			rep := f.run(t)
			var fix []string
			if tt.fix != nil {
				fix = tt.fix(f)
			}
			wantCheck(t, rep, tt.check, tt.status, tt.detail, fix)
			if rep.OK == (tt.status == Fail) {
				t.Errorf("report OK = %t with %s %s", rep.OK, tt.check, tt.status)
			}
			if names(rep) == nil || !slices.Equal(names(rep), allChecks) {
				t.Errorf("checks %v, want all of them", names(rep))
			}
		})
	}
}

func configPath(f *fixture) string { return filepath.Join(f.home, config.ConfigFile) }

func writeConfig(t *testing.T, f *fixture, text string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(configPath(f), []byte(text), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(configPath(f), mode); err != nil {
		t.Fatal(err)
	}
}

// TestDatabaseInUse: a daemon holds the file, so it is not checked, and
// that is not a problem.
func TestDatabaseInUse(t *testing.T) {
	f := newFixture(t, "")
	f.sys.missing = true
	db := openStore(t, f)
	defer db.Close()
	rep := f.run(t)
	wantCheck(t, rep, "database", Skip, []string{"in use by the running daemon"}, nil)
	if !rep.OK {
		t.Errorf("report not OK: %+v", rep.Checks)
	}
}

// fakeDaemon answers the control API as a running daemon would.
type fakeDaemon struct{}

func (fakeDaemon) Mint(context.Context, control.MintRequest) (control.MintResult, error) {
	return control.MintResult{}, control.ErrRefused
}
func (fakeDaemon) Unpair(context.Context, string) error { return control.ErrRefused }
func (fakeDaemon) Status(context.Context) (control.Status, error) {
	return control.Status{PID: 4242, Version: "v9.9.9", StartedAt: epoch.Add(-90 * 60e9), Commands: control.CommandsInCgroups,
		Gateways: []control.GatewayStatus{{Name: "telegram", Configured: true, Connected: true, BotName: "latch_test_bot"}}}, nil
}

// walkingDaemon is a running daemon that could not have cgroups.
type walkingDaemon struct{ fakeDaemon }

func (d walkingDaemon) Status(ctx context.Context) (control.Status, error) {
	st, err := d.fakeDaemon.Status(ctx)
	st.Commands = "no cgroup per command: systemd did not delegate cgroup /user.slice/session-3.scope to latch"
	return st, err
}

// startDaemon serves the control socket of f's home until the test ends.
func startDaemon(t *testing.T, f *fixture) {
	t.Helper()
	serveDaemon(t, f, fakeDaemon{})
}

func TestDaemonRunning(t *testing.T) {
	f := newFixture(t, "")
	f.sys.missing = true
	startDaemon(t, f)
	rep := f.run(t)
	wantCheck(t, rep, "daemon", OK, []string{"pid 4242", "v9.9.9", "up 1h30m0s"}, nil)
}

// TestDaemonWithoutCgroups: a daemon whose commands are not in cgroups of
// their own (run from a terminal, or by an older unit without Delegate=yes)
// is a warning that says why and how to get them.
func TestDaemonWithoutCgroups(t *testing.T) {
	f := newFixture(t, "")
	f.sys.missing = true
	serveDaemon(t, f, walkingDaemon{})
	rep := f.run(t)
	wantCheck(t, rep, "daemon", Warn, []string{"pid 4242", "not in cgroups of their own", "session-3.scope", "outrun"},
		[]string{"latch service install", "Delegate=yes"})
}

func TestWebhook(t *testing.T) {
	const hook = "https://hooks.example.com/s3cretPATH/update?k=v"
	for _, daemon := range []bool{false, true} {
		t.Run(map[bool]string{false: "no daemon", true: "daemon running"}[daemon], func(t *testing.T) {
			tg := telegramtest.New(botToken)
			defer tg.Close()
			tg.SetWebhook(hook)
			f := newFixture(t, tomlConfig("telegram.api_url", tg.URL()))
			f.env[config.EnvTelegramToken] = botToken
			f.sys.missing = true
			if daemon {
				startDaemon(t, f)
			}
			rep := f.run(t)
			wantCheck(t, rep, "telegram", OK, []string{"@latch_test_bot"}, nil)
			c := check(t, rep, "webhook")
			if strings.Contains(c.Detail+c.Fix, "s3cret") {
				t.Errorf("webhook check shows the webhook's path: %+v", c)
			}
			if daemon {
				wantCheck(t, rep, "webhook", Fail, []string{"https://hooks.example.com/…", "while latch runs"},
					[]string{"stop the other program", "@BotFather", config.EnvTelegramToken})
			} else {
				wantCheck(t, rep, "webhook", Warn, []string{"https://hooks.example.com/…", "removes it when it starts"},
					[]string{"latch run removes it", tg.URL() + "/bot<token>/deleteWebhook", "@BotFather"})
			}
			if rep.OK == daemon {
				t.Errorf("report OK = %t, want %t", rep.OK, !daemon)
			}
			if got := tg.Calls("deleteWebhook"); len(got) != 0 {
				t.Errorf("doctor called deleteWebhook %d times; it must only look", len(got))
			}
		})
	}
}

// TestDatabaseDamaged breaks the page of a bucket that opening the store
// does not read, so only bbolt's consistency check finds it.
func TestDatabaseDamaged(t *testing.T) {
	f := newFixture(t, "")
	f.sys.missing = true
	db := openStore(t, f)
	var root uint64
	err := db.Bolt().Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("audit")) // big enough to get pages of its own
		for i := range 200 {
			if err := b.Put(fmt.Appendf(nil, "k%04d", i), make([]byte, 100)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	db.Bolt().View(func(tx *bolt.Tx) error {
		root = uint64(tx.Bucket([]byte("audit")).Root())
		return nil
	})
	pageSize := db.Bolt().Info().PageSize
	db.Close()
	file, err := os.OpenFile(config.DBPath(f.home), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	// A page header is the page id (8 bytes), then the flags (2 bytes):
	// zero flags are no page type at all.
	if _, err := file.WriteAt([]byte{0, 0}, int64(root)*int64(pageSize)+8); err != nil {
		t.Fatal(err)
	}
	file.Close()

	rep := f.run(t)
	path := config.DBPath(f.home)
	wantCheck(t, rep, "database", Fail, []string{path + " is damaged", "found 1 error", fmt.Sprintf("page %d", root)},
		[]string{"mv " + path + " " + path + ".broken"})
	if rep.OK {
		t.Error("report OK with a damaged database")
	}
}

// TestWebhookMode: with [telegram] webhook_url set, latch's own webhook is
// fine, another program's is a failure, and none at all (latch not running
// yet) is a warning; the path, which may carry a secret, is never shown.
func TestWebhookMode(t *testing.T) {
	const ours = "https://bot.example.com/tg/s3cretPATH"
	tests := []struct {
		name   string
		set    string
		status Status
		detail []string
	}{
		{"ours", ours, OK, []string{"webhook https://bot.example.com/… is set"}},
		{"another program's", "https://other.example.net/hook", Fail, []string{"https://other.example.net/…", "not latch's https://bot.example.com/…"}},
		{"none yet", "", Warn, []string{"no webhook set yet"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tg := telegramtest.New(botToken)
			defer tg.Close()
			if tt.set != "" {
				tg.SetWebhook(tt.set)
			}
			f := newFixture(t, tomlConfig("telegram.api_url", tg.URL(), "telegram.webhook_url", ours,
				"telegram.webhook_secret", "doctorTestSecret_0123456789"))
			f.env[config.EnvTelegramToken] = botToken
			f.sys.missing = true
			rep := f.run(t)
			wantCheck(t, rep, "webhook", tt.status, tt.detail, nil)
			c := check(t, rep, "webhook")
			if strings.Contains(c.Detail+c.Fix, "s3cret") || strings.Contains(c.Detail+c.Fix, "doctorTestSecret") {
				t.Errorf("webhook check shows a secret: %+v", c)
			}
		})
	}
}

// endpointDaemon is a running daemon that talks to the given API roots.
type endpointDaemon struct {
	fakeDaemon
	endpoints map[string]string
}

func (d endpointDaemon) Status(ctx context.Context) (control.Status, error) {
	st, err := d.fakeDaemon.Status(ctx)
	st.Endpoints = d.endpoints
	return st, err
}

// TestDaemonEndpointDrift: a daemon that reaches another API server than
// this shell's configuration names is a warning naming the hosts only (a
// path may hold a key); one that agrees is fine, also when the shell names
// the provider's public API that the daemon uses by default.
func TestDaemonEndpointDrift(t *testing.T) {
	tg := telegramtest.New(botToken)
	defer tg.Close()
	const model = "http://127.0.0.1:1/v1" // nothing listens: the model check fails at once, offline
	cfg := tomlConfig("telegram.api_url", tg.URL(), "agent.provider", "openai", "agent.base_url", model)
	for _, tc := range []struct {
		name      string
		endpoints map[string]string
		status    Status
		detail    []string
	}{
		{"agreeing", map[string]string{control.EndpointTelegram: tg.URL(), control.EndpointModel: model}, OK, nil},
		{"another model server", map[string]string{control.EndpointTelegram: tg.URL(), control.EndpointModel: "http://10.1.2.3:8000/s3cret/v1"}, Warn,
			[]string{"reaches the model API at 10.1.2.3:8000, this shell's configuration at 127.0.0.1:1"}},
		{"another Telegram path", map[string]string{control.EndpointTelegram: tg.URL() + "/s3cret"}, Warn,
			[]string{"reaches the Telegram Bot API at another path on " + strings.TrimPrefix(tg.URL(), "http://")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, cfg)
			f.env[config.EnvTelegramToken] = botToken
			f.env[config.EnvOpenAIAPIKey] = "sk-test-key"
			f.sys.missing = true
			serveDaemon(t, f, endpointDaemon{endpoints: tc.endpoints})
			rep := f.run(t)
			wantCheck(t, rep, "daemon", tc.status, tc.detail, nil)
			if c := check(t, rep, "daemon"); strings.Contains(c.Detail+c.Fix, "s3cret") {
				t.Errorf("the check shows an endpoint's path: %+v", c)
			}
		})
	}
}

// TestDaemonViewWhereTheShellDiffers: run from a shell without the token
// variable, doctor said "the Telegram gateway is off" while the daemon,
// which has the token from its service environment, was connected. It
// reports the daemon's view and says where this shell differs.
func TestDaemonViewWhereTheShellDiffers(t *testing.T) {
	f := newFixture(t, "")
	f.sys.missing = true
	startDaemon(t, f)
	rep := f.run(t)
	wantCheck(t, rep, "daemon", OK, []string{"the daemon's gateways: telegram connected as @latch_test_bot (this shell's config does not turn it on"}, nil)
	wantCheck(t, rep, "telegram", OK, []string{"the running daemon's Telegram gateway is connected as @latch_test_bot", "this shell has no bot token"}, nil)
}

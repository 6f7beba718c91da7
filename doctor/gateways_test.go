package doctor

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/latchd/latch/config"
	"github.com/latchd/latch/control"
	"github.com/latchd/latch/gateways/telegram/telegramtest"
)

// gatewayDaemon is a running daemon with the given gateways.
type gatewayDaemon struct {
	fakeDaemon
	gateways []string
}

func (d gatewayDaemon) Status(ctx context.Context) (control.Status, error) {
	st, err := d.fakeDaemon.Status(ctx)
	st.Gateways = nil
	for _, g := range d.gateways {
		st.Gateways = append(st.Gateways, control.GatewayStatus{Name: g, Configured: true, Connected: true})
	}
	return st, err
}

// serveDaemon serves b on the control socket of f's home until the test
// ends.
func serveDaemon(t *testing.T, f *fixture, b control.Backend) {
	t.Helper()
	srv, err := control.Listen(config.SocketPath(f.home), b, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { srv.Serve(ctx) })
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
}

// TestDaemonMissingGateway: a gateway the config turns on that the running
// daemon lacks is a failure, even though the checks of the gateway itself
// (which use doctor's own environment) pass. The fix depends on where the
// token came from and on what runs the daemon.
func TestDaemonMissingGateway(t *testing.T) {
	const discordToken = "MTIzNDU2.discord.TOKENsecret0042"
	tests := []struct {
		name     string
		inConfig bool     // the token is in config.toml, not the environment
		discord  bool     // a Discord token in the environment too
		running  []string // the daemon's gateways
		unit     string   // "user" or "system": latch.service runs the daemon
		status   Status
		detail   []string
		fix      []string
	}{
		{name: "env, service", unit: "user", status: Fail,
			detail: []string{"without the telegram gateway", "latch pair telegram fails with \"unknown gateway\""},
			fix: []string{"latch.service does not get LATCH_TELEGRAM_TOKEN", "[telegram] token_file",
				"systemctl --user edit latch.service", "EnvironmentFile=", "systemctl --user restart latch.service"}},
		{name: "env, system", unit: "system", status: Fail,
			fix: []string{"latch.service does not get LATCH_TELEGRAM_TOKEN", "sudo systemctl edit latch.service", "sudo systemctl restart"}},
		{name: "env, run", status: Fail,
			fix: []string{"(pid 4242) was started without LATCH_TELEGRAM_TOKEN", "latch run", "[telegram] token_file"}},
		{name: "file, service", inConfig: true, unit: "user", status: Fail,
			fix: []string{"config changed since latch started", "systemctl --user reload latch.service"}},
		{name: "file, run", inConfig: true, status: Fail,
			fix: []string{"config changed since latch started", "kill -HUP 4242"}},
		{name: "env, has it", running: []string{"telegram"}, unit: "user", status: OK},
		{name: "discord", discord: true, running: []string{"telegram"}, status: Fail,
			detail: []string{"without the discord gateway"}, fix: []string{"LATCH_DISCORD_TOKEN", "[discord] token_file"}},
		{name: "both", discord: true, status: Fail,
			detail: []string{"without the telegram and discord gateways"}, fix: []string{"LATCH_TELEGRAM_TOKEN and LATCH_DISCORD_TOKEN"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tg := telegramtest.New(botToken)
			defer tg.Close()
			settings := []string{"telegram.api_url", tg.URL()}
			if tt.inConfig {
				settings = append(settings, "telegram.token", botToken)
			}
			f := newFixture(t, tomlConfig(settings...))
			if !tt.inConfig {
				f.env[config.EnvTelegramToken] = botToken
			}
			if tt.discord {
				f.env[config.EnvDiscordToken] = discordToken
			}
			if tt.unit != "" {
				system := tt.unit == "system"
				f.installUnit(t, system, "enabled")
				show := "systemctl show latch.service -p MainPID --value"
				if !system {
					show = "systemctl --user show latch.service -p MainPID --value"
				}
				f.sys.out[show] = "4242\n"
			}
			serveDaemon(t, f, gatewayDaemon{gateways: tt.running})
			rep := f.run(t)
			wantCheck(t, rep, "daemon", tt.status, tt.detail, tt.fix)
			// The gateway's own check passes: its token works.
			wantCheck(t, rep, "telegram", OK, []string{"@latch_test_bot"}, nil)
			if c := check(t, rep, "daemon"); strings.Contains(c.Detail+c.Fix, discordToken) {
				t.Errorf("daemon check shows the Discord token: %+v", c)
			}
		})
	}
}

// TestDaemonGatewayUnitNotTheDaemon: an installed unit whose main process
// is not the running daemon (latch run in a terminal) gets the advice for
// latch run.
func TestDaemonGatewayUnitNotTheDaemon(t *testing.T) {
	tg := telegramtest.New(botToken)
	defer tg.Close()
	f := newFixture(t, tomlConfig("telegram.api_url", tg.URL()))
	f.env[config.EnvTelegramToken] = botToken
	f.installUnit(t, false, "enabled")
	f.sys.out["systemctl --user show latch.service -p MainPID --value"] = "0\n"
	serveDaemon(t, f, gatewayDaemon{})
	rep := f.run(t)
	wantCheck(t, rep, "daemon", Fail, nil, []string{"was started without LATCH_TELEGRAM_TOKEN", "latch run"})
}

// TestServiceLacksShellSecret: a token or key that only doctor's own
// environment has does not reach latch.service; the service check says so
// unless the unit's environment or config.toml supplies it.
func TestServiceLacksShellSecret(t *testing.T) {
	const (
		showUser   = "systemctl --user show latch.service -p Environment -p EnvironmentFiles"
		managerEnv = "systemctl --user show-environment"
	)
	tests := []struct {
		name   string
		system bool
		out    map[string]string
		fail   string // a command that fails
		file   bool   // config.toml names a token file too
		status Status
		detail []string
		fix    []string
	}{
		{name: "user unit without it", status: Warn,
			detail: []string{"this shell sets LATCH_TELEGRAM_TOKEN, but latch.service does not get it", "without the Telegram bot token"},
			fix:    []string{"[telegram] token_file in ", "systemctl --user edit latch.service", "systemctl --user restart latch.service"}},
		{name: "system unit without it", system: true, status: Warn,
			detail: []string{"latch.service does not get it"}, fix: []string{"sudo systemctl edit latch.service"}},
		{name: "a drop-in sets it", out: map[string]string{showUser: "Environment=LATCH_TELEGRAM_TOKEN=x\n"}, status: OK},
		{name: "the user manager has it", out: map[string]string{managerEnv: "LATCH_TELEGRAM_TOKEN=x\n"}, status: OK},
		{name: "a token file behind it", file: true, status: OK},
		{name: "systemd cannot say", fail: showUser, status: OK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tg := telegramtest.New(botToken)
			defer tg.Close()
			f := newFixture(t, "")
			settings := []string{"telegram.api_url", tg.URL()}
			if tt.file {
				file := f.home + "/tg.token"
				writeFile(t, file, botToken+"\n", 0o600)
				settings = append(settings, "telegram.token_file", file)
			}
			writeConfig(t, f, tomlConfig(settings...), 0o600)
			f.env[config.EnvTelegramToken] = botToken
			rep := f.runWithUnit(t, tt.system, tt.out, tt.fail)
			wantCheck(t, rep, "service", tt.status, tt.detail, tt.fix)
			wantCheck(t, rep, "telegram", OK, []string{"token from LATCH_TELEGRAM_TOKEN in this shell"}, nil)
		})
	}
}

// TestServiceLacksShellAPIURL: an API URL that only doctor's own
// environment has (a local Bot API server, a local model) does not reach
// latch.service, which then talks to another server than the one doctor's
// checks reached, and sends it the chat. The service check says so, naming
// the variable and never its value, unless the unit's environment or
// config.toml gives the service the same setting.
func TestServiceLacksShellAPIURL(t *testing.T) {
	const (
		showUser   = "systemctl --user show latch.service -p Environment -p EnvironmentFiles"
		managerEnv = "systemctl --user show-environment"
		secretPath = "/SECRETpathPART"
	)
	tests := []struct {
		name     string
		system   bool
		openai   bool // the model is reached through OPENAI_BASE_URL, not Telegram through LATCH_TELEGRAM_API_URL
		cfgURL   bool // config.toml sets the same URL itself
		envToken bool // the bot token comes from the shell too
		out      map[string]string
		fail     string // a command that fails
		status   Status
		detail   []string
		fix      []string
	}{
		{name: "Telegram API URL only in the shell", status: Warn,
			detail: []string{"this shell sets LATCH_TELEGRAM_API_URL, but latch.service does not get it", "another Telegram Bot API server"},
			fix:    []string{"set [telegram] api_url in ", "printenv LATCH_TELEGRAM_API_URL", "systemctl --user edit latch.service", "systemctl --user restart latch.service"}},
		{name: "OpenAI base URL only in the shell", openai: true, status: Warn,
			detail: []string{"this shell sets OPENAI_BASE_URL, but latch.service does not get it", "another model API server"},
			fix:    []string{"set [agent] base_url in ", "printenv OPENAI_BASE_URL"}},
		{name: "system unit without it", system: true, status: Warn,
			detail: []string{"LATCH_TELEGRAM_API_URL, but latch.service does not get it"}, fix: []string{"sudo systemctl edit latch.service"}},
		{name: "and the token", envToken: true, status: Warn,
			detail: []string{"this shell sets LATCH_TELEGRAM_TOKEN, but latch.service does not get it", "this shell sets LATCH_TELEGRAM_API_URL"},
			fix:    []string{"[telegram] token_file", "[telegram] api_url"}},
		{name: "a drop-in sets it", out: map[string]string{showUser: "Environment=LATCH_TELEGRAM_API_URL=x\n"}, status: OK},
		{name: "the user manager has it", out: map[string]string{managerEnv: "LATCH_TELEGRAM_API_URL=x\n"}, status: OK},
		{name: "config.toml has the same api_url", cfgURL: true, status: OK},
		{name: "config.toml has base_url, which wins", openai: true, cfgURL: true, status: OK},
		{name: "systemd cannot say", fail: showUser, status: OK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tg := telegramtest.New(botToken)
			defer tg.Close()
			f := newFixture(t, "")
			url, variable := tg.URL()+secretPath, config.EnvTelegramAPIURL
			settings := []string{"telegram.token", botToken}
			if tt.envToken {
				settings = nil
				f.env[config.EnvTelegramToken] = botToken
			}
			if tt.openai {
				url, variable = "http://127.0.0.1:1/v1"+secretPath, config.EnvOpenAIBaseURL
				settings = append(settings, "agent.provider", "openai")
				if tt.cfgURL {
					settings = append(settings, "agent.base_url", "http://127.0.0.1:1/v1")
				}
			} else if tt.cfgURL {
				settings = append(settings, "telegram.api_url", url)
			}
			writeConfig(t, f, tomlConfig(settings...), 0o600)
			f.env[variable] = url
			rep := f.runWithUnit(t, tt.system, tt.out, tt.fail)
			wantCheck(t, rep, "service", tt.status, tt.detail, tt.fix)
			if c := check(t, rep, "service"); strings.Contains(c.Detail+c.Fix, secretPath) || strings.Contains(c.Detail+c.Fix, "127.0.0.1") {
				t.Errorf("the service check shows the URL: %q, fix %q", c.Detail, c.Fix)
			}
		})
	}
}

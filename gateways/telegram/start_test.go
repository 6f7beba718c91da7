package telegram

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/latchd/latch/gateways"
	"github.com/latchd/latch/gateways/telegram/telegramtest"
)

func TestStart(t *testing.T) {
	srv := newFake(t)
	srv.SetBotUsername("latch_home_bot")
	g, _ := newGateway(t, srv)
	if got := g.PairLink("ABCD1234"); got != "" {
		t.Errorf("PairLink before Start = %q, want \"\" (bot name unknown)", got)
	}
	if err := g.Start(testContext(t)); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if info := g.Info(); info.BotName != "latch_home_bot" || !info.Connected || info.LastError != "" {
		t.Errorf("Info = %+v, want bot latch_home_bot, connected, no error", info)
	}
	if got, want := g.PairLink("ABCD1234"), "https://t.me/latch_home_bot?start=ABCD1234"; got != want {
		t.Errorf("PairLink = %q, want %q", got, want)
	}
	if g.Name() != "telegram" {
		t.Errorf("Name = %q, want telegram", g.Name())
	}
	// No webhook is set, so no round trip deletes one before the first
	// poll (Run deletes one it meets: TestRunRemovesWebhook).
	if n := srv.Count("deleteWebhook"); n != 0 {
		t.Errorf("Start made %d deleteWebhook calls, want none", n)
	}
	// The command menu is set by Run, beside its first poll, not by Start.
	if n := len(srv.Calls("setMyCommands")); n != 0 {
		t.Errorf("Start made %d setMyCommands calls, want none (Run sets the menu)", n)
	}
	stop := run(t, g, &memSink{})
	waitFake(t, srv, "the command menu", func() bool { return len(srv.Commands()) > 0 })
	// The menu may be set before the first poll is out (each on a
	// connection of its own): the second Run's poll is counted after it.
	waitFake(t, srv, "a poll of the first Run", func() bool { return len(srv.Calls("getUpdates")) >= 1 })
	var names []string
	for _, c := range srv.Commands() {
		names = append(names, c.Command)
	}
	if want := []string{"new", "stop", "status", "jobs", "help"}; !slices.Equal(names, want) {
		t.Errorf("commands = %v, want %v", names, want)
	}
	// Once per Start: a Run after the first sets it no more.
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	stop = run(t, g, &memSink{})
	waitFake(t, srv, "a poll of the second Run", func() bool { return len(srv.Calls("getUpdates")) >= 2 })
	stop()
	if n := len(srv.Calls("setMyCommands")); n != 1 {
		t.Errorf("setMyCommands calls = %d after two Runs of one Start, want 1", n)
	}
}

func TestStartIgnoresNonEssentialFailures(t *testing.T) {
	srv := newFake(t)
	srv.Inject("setMyCommands", telegramtest.Fault{Status: 400, Description: "Bad Request: BOT_COMMAND_INVALID"})
	g, logs := newGateway(t, srv)
	if err := g.Start(testContext(t)); err != nil {
		t.Fatalf("Start = %v, want nil: setMyCommands is not essential", err)
	}
	run(t, g, &memSink{})
	eventually(t, "the menu's failure logged", func() bool { return len(logs.lines("setMyCommands failed")) > 0 })
	if len(logs.lines("level=DEBUG", "setMyCommands failed")) != 1 {
		t.Errorf("setMyCommands failure not logged at debug; logs:\n%s", logs)
	}
}

func TestStartErrors(t *testing.T) {
	tests := []struct {
		name   string
		token  string // token the gateway uses; the fake accepts testToken
		apiURL string // "" = the fake's
		fault  *telegramtest.Fault
		want   string
		wantIs error
	}{
		{name: "rejected token", token: "111:wrong-token-value", wantIs: ErrUnauthorized,
			want: "telegram: the bot token was rejected by the Bot API (401 Unauthorized); check [telegram] token"},
		{name: "401 from getMe", fault: &telegramtest.Fault{Status: 401}, wantIs: ErrUnauthorized},
		{name: "404 from getMe", fault: &telegramtest.Fault{Status: 404}, want: "404 Not Found to getMe; check [telegram] token and api_url"},
		{name: "server error", fault: &telegramtest.Fault{Status: 502, Body: "<html>bad gateway</html>"}, want: "telegram: getMe: Bot API answered HTTP 502 Bad Gateway"},
		{name: "no token", token: " ", want: "no bot token configured"},
		{name: "bad api_url", apiURL: "ftp://example.com", want: `invalid api_url "ftp://example.com"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newFake(t)
			if tt.fault != nil {
				srv.Inject("getMe", *tt.fault)
			}
			g, _ := newGateway(t, srv, func(c *Config) {
				if tt.token != "" {
					c.Token = tt.token
				}
				if tt.apiURL != "" {
					c.APIURL = tt.apiURL
				}
			})
			err := g.Start(testContext(t))
			if err == nil {
				t.Fatal("Start succeeded, want an error")
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("Start = %v, want errors.Is %v", err, tt.wantIs)
			}
			if tt.wantIs == ErrUnauthorized && !errors.Is(err, gateways.ErrUnauthorized) {
				t.Errorf("Start = %v, want it to wrap gateways.ErrUnauthorized for the daemon", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Start = %q, want it to contain %q", err, tt.want)
			}
			if info := g.Info(); info.Connected || info.BotName != "" {
				t.Errorf("Info after failed Start = %+v, want disconnected without a bot name", info)
			}
		})
	}
}

func TestNotStarted(t *testing.T) {
	srv := newFake(t)
	g, _ := newGateway(t, srv)
	if err := g.Run(testContext(t), &memSink{}); !errors.Is(err, errNotStarted) {
		t.Errorf("Run before Start = %v, want errNotStarted", err)
	}
	if _, err := g.Send(testContext(t), "1", replyText("x")); !errors.Is(err, errNotStarted) {
		t.Errorf("Send before Start = %v, want errNotStarted", err)
	}
}

// TestStartWarnsOfPrivacyMode: with groups allowed, a bot in privacy mode
// would never see the owner's plain messages in a group; Start says so and
// how to fix it.
func TestStartWarnsOfPrivacyMode(t *testing.T) {
	tests := []struct {
		allowGroups, privacy, warn bool
	}{
		{true, true, true},
		{true, false, false},
		{false, true, false},
	}
	for _, tt := range tests {
		srv := newFake(t)
		srv.SetPrivacyMode(tt.privacy)
		_, logs := started(t, srv, func(c *Config) { c.AllowGroups = tt.allowGroups })
		warns := logs.lines("level=WARN", "privacy mode is on", "/setprivacy", "@BotFather", "remove the bot from the group and add it again")
		if (len(warns) == 1) != tt.warn {
			t.Errorf("allow_groups %t, privacy mode %t: %d warnings, want one: %t; logs:\n%s",
				tt.allowGroups, tt.privacy, len(warns), tt.warn, logs)
		}
	}
}

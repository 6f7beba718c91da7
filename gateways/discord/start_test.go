package discord

import (
	"errors"
	"strings"
	"testing"

	"github.com/bwmarrin/discordgo"

	"github.com/latchd/latch/gateways"
	"github.com/latchd/latch/gateways/discord/discordtest"
)

func TestStart(t *testing.T) {
	srv := newFake(t)
	g, _ := newGateway(t, srv)
	if g.Name() != "discord" {
		t.Errorf("Name = %q, want discord", g.Name())
	}
	if err := g.Start(testContext(t)); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if info := g.Info(); info.BotName != "latch_test_bot" || !info.Connected || info.LastError != "" {
		t.Errorf("Info = %+v, want bot latch_test_bot, connected, no error", info)
	}
	ids := srv.Identifies()
	if len(ids) != 1 || !ids[0].TokenOK {
		t.Fatalf("IDENTIFYs = %+v, want one with the token", ids)
	}
	want := discordtest.IntentDirectMessages
	if ids[0].Intents != want {
		t.Errorf("intents = %b, want DIRECT_MESSAGES (%b): no guild messages without allow_groups, no privileged intent", ids[0].Intents, want)
	}
	if n := srv.Count(discordtest.RouteMe); n != 1 {
		t.Errorf("GET /users/@me called %d times, want 1 (the token check)", n)
	}
}

func TestStartAllowGroupsAddsGuildMessages(t *testing.T) {
	srv := newFake(t)
	started(t, srv, func(c *Config) { c.AllowGroups = true })
	want := discordtest.IntentDirectMessages | discordtest.IntentGuildMessages
	if got := srv.Identifies()[0].Intents; got != want {
		t.Errorf("intents = %b, want %b", got, want)
	}
}

func TestStartErrors(t *testing.T) {
	tests := []struct {
		name   string
		token  string // "" = testToken
		apiURL string // "" = the fake's
		setup  func(*discordtest.Server)
		want   string
		wantIs error
	}{
		{name: "rejected token", token: "MTExMQ.GabcDE.wrongWrongWrongWrong", wantIs: ErrUnauthorized,
			want: "discord: the bot token was rejected by Discord (401 Unauthorized); check [discord] token"},
		{name: "401 from users/@me", setup: func(s *discordtest.Server) {
			s.Inject(discordtest.RouteMe, discordtest.Fault{Status: 401})
		}, wantIs: ErrUnauthorized},
		{name: "404 from users/@me", setup: func(s *discordtest.Server) {
			s.Inject(discordtest.RouteMe, discordtest.Fault{Status: 404})
		}, want: "404 Not Found to GET /users/@me; check [discord] api_url"},
		{name: "proxy error page", setup: func(s *discordtest.Server) {
			s.Inject(discordtest.RouteMe, discordtest.Fault{Status: 503, Body: "<html>down</html>"})
		}, want: "Discord answered HTTP 503 Service Unavailable without a JSON body"},
		{name: "no token", token: " ", want: "no bot token configured"},
		{name: "bad api_url", apiURL: "ftp://example.com", want: `invalid api_url "ftp://example.com"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newFake(t)
			if tt.setup != nil {
				tt.setup(srv)
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
			if info := g.Info(); info.Connected {
				t.Errorf("Info after failed Start = %+v, want disconnected", info)
			}
		})
	}
}

func TestNotStarted(t *testing.T) {
	srv := newFake(t)
	g, _ := newGateway(t, srv)
	if err := g.Run(testContext(t), newSink("")); !errors.Is(err, errNotStarted) {
		t.Errorf("Run before Start = %v, want errNotStarted", err)
	}
	if _, err := g.Send(testContext(t), "1", gateways.Reply{Text: "x"}); !errors.Is(err, errNotStarted) {
		t.Errorf("Send before Start = %v, want errNotStarted", err)
	}
	if err := g.Close(); err != nil {
		t.Errorf("Close before Start = %v, want nil", err)
	}
}

// TestSetAPIBase checks that every endpoint discordgo computes at init
// follows the base, and the functions built on them too.
func TestSetAPIBase(t *testing.T) {
	t.Cleanup(func() { _ = SetAPIBase(DefaultAPIURL) })
	if err := SetAPIBase("http://127.0.0.1:9/prefix/"); err != nil {
		t.Fatal(err)
	}
	const api = "http://127.0.0.1:9/prefix/api/v10/"
	vars := map[string]string{
		"EndpointDiscord": discordgo.EndpointDiscord, "EndpointAPI": discordgo.EndpointAPI,
		"EndpointGuilds": discordgo.EndpointGuilds, "EndpointChannels": discordgo.EndpointChannels,
		"EndpointUsers": discordgo.EndpointUsers, "EndpointGateway": discordgo.EndpointGateway,
		"EndpointGatewayBot": discordgo.EndpointGatewayBot, "EndpointWebhooks": discordgo.EndpointWebhooks,
		"EndpointStickers": discordgo.EndpointStickers, "EndpointStageInstances": discordgo.EndpointStageInstances,
		"EndpointSKUs": discordgo.EndpointSKUs, "EndpointVoice": discordgo.EndpointVoice,
		"EndpointVoiceRegions": discordgo.EndpointVoiceRegions, "EndpointNitroStickersPacks": discordgo.EndpointNitroStickersPacks,
		"EndpointGuildCreate": discordgo.EndpointGuildCreate, "EndpointApplications": discordgo.EndpointApplications,
		"EndpointOAuth2": discordgo.EndpointOAuth2, "EndpointOAuth2Applications": discordgo.EndpointOAuth2Applications,
		"EndpointOauth2": discordgo.EndpointOauth2, "EndpointOauth2Applications": discordgo.EndpointOauth2Applications,
		"EndpointChannelMessages":     discordgo.EndpointChannelMessages("1"),
		"EndpointInteractionResponse": discordgo.EndpointInteractionResponse("1", "t"),
		"EndpointWebhookToken":        discordgo.EndpointWebhookToken("1", "t"),
		"EndpointUserChannels":        discordgo.EndpointUserChannels("@me"),
	}
	for name, v := range vars {
		want := api
		if name == "EndpointDiscord" {
			want = "http://127.0.0.1:9/prefix/"
		}
		if !strings.HasPrefix(v, want) {
			t.Errorf("%s = %q, want it under %q", name, v, want)
		}
	}
	if discordgo.EndpointGatewayBot != api+"gateway/bot" || discordgo.APIVersion != "10" {
		t.Errorf("EndpointGatewayBot = %q, APIVersion = %q", discordgo.EndpointGatewayBot, discordgo.APIVersion)
	}
	if err := SetAPIBase(DefaultAPIURL); err != nil || discordgo.EndpointChannels != "https://discord.com/api/v10/channels/" {
		t.Errorf("back to the default: %v, EndpointChannels = %q", err, discordgo.EndpointChannels)
	}
	for _, bad := range []string{"", "discord.com", "ftp://x", "https://x/?q=1"} {
		if err := SetAPIBase(bad); err == nil {
			t.Errorf("SetAPIBase(%q) = nil, want an error", bad)
		}
	}
}

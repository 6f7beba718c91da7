package discord_test

import (
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/latchd/latch/gateways"
	"github.com/latchd/latch/gateways/discord"
	"github.com/latchd/latch/gateways/discord/discordtest"
	"github.com/latchd/latch/gateways/gatewaytest"
)

// TestConformance runs the suite every adapter passes against the fake
// Discord.
func TestConformance(t *testing.T) {
	gatewaytest.Run(t, newConformanceFake)
}

func newConformanceFake(t *testing.T) *gatewaytest.Fake {
	srv := discordtest.New(token)
	t.Cleanup(srv.Close)
	owner := discordtest.User{ID: "300000000000000001", Username: "owner"}
	stranger := discordtest.User{ID: "300000000000000002", Username: "stranger"}
	other := discordtest.User{ID: "300000000000000003", Username: "other"}
	const guild, room = "400000000000000001", "400000000000000002"
	dm := srv.DMChannel(owner)

	var mu sync.Mutex
	sentByOwner := map[string]discordtest.Message{}
	messages := func(channel string) []gatewaytest.Message {
		var out []gatewaytest.Message
		for _, s := range srv.SentTo(channel) {
			if s.Ephemeral || s.Deferred {
				continue // an answer to a press, shown to its user only
			}
			out = append(out, gatewaytest.Message{ID: s.ID, Text: s.Text(), Pings: !s.NoPings()})
		}
		return out
	}
	return &gatewaytest.Fake{
		Name:  "discord",
		Token: token,
		New: func(tok string, log *slog.Logger) gateways.Gateway {
			return discord.New(discord.Config{Token: tok, APIURL: srv.URL(), MinBackoff: 10 * time.Millisecond,
				MaxBackoff: 100 * time.Millisecond, EditInterval: 10 * time.Millisecond}, log)
		},
		Limit:     2000,
		Measure:   utf8.RuneCountInString,
		OwnerChat: dm,
		// While latch is down nothing is dispatched: the message is in the
		// DM's history, which the next start reads.
		FromOwner: func(text string, down bool) string {
			var m discordtest.Message
			if down {
				m = srv.AddDMHistory(owner, text)
			} else {
				m = srv.SendDM(owner, text)
			}
			mu.Lock()
			sentByOwner[m.ID] = m
			mu.Unlock()
			return m.ID
		},
		FromStranger: func(text string) { srv.SendDM(stranger, text) },
		// Mentioning the bot: the only guild messages it would read.
		FromOther: func(text string) { srv.SendGuildMessage(guild, room, other, srv.BotMention()+" "+text) },
		Redeliver: func(id string) {
			mu.Lock()
			m := sentByOwner[id]
			mu.Unlock()
			srv.DeliverAgain(m)
		},
		ToOwner:    func() []gatewaytest.Message { return messages(dm) },
		ToStranger: func() []gatewaytest.Message { return messages(srv.DMChannel(stranger)) },
		ToOther:    func() []gatewaytest.Message { return messages(room) },
		Press: func(id, data string) (func() int, error) {
			in, err := srv.PressButton(owner, dm, id, data)
			if err != nil {
				return nil, err
			}
			return func() int {
				n := 0
				for _, c := range srv.Calls(discordtest.RouteInteractionCallback) {
					if strings.Contains(c.Path, "/"+in.ID+"/") {
						n++
					}
				}
				return n
			}, nil
		},
		FailSends: func(status, n, retryAfter int) {
			srv.Inject(discordtest.RouteCreateMessage, discordtest.Fault{Status: status, RetryAfter: float64(retryAfter), Times: n})
		},
		ClearFaults: func() { srv.ClearFaults(discordtest.RouteCreateMessage) },
		Sends:       func() int { return srv.Count(discordtest.RouteCreateMessage) },
	}
}

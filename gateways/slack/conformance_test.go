package slack_test

import (
	"log/slog"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/latchd/latch/gateways"
	"github.com/latchd/latch/gateways/gatewaytest"
	"github.com/latchd/latch/gateways/slack"
	"github.com/latchd/latch/gateways/slack/slacktest"
)

const (
	botToken = "xoxb-1-latch-test-bot-token"
	appToken = "xapp-1-latch-test-app-token"
	room     = "C0ROOM"
)

var (
	owner    = slacktest.User{ID: "U0OWNER"}
	stranger = slacktest.User{ID: "U0STRANGER"}
	other    = slacktest.User{ID: "U0OTHER"}
)

// TestConformance runs the suite every adapter passes against the fake
// Slack.
func TestConformance(t *testing.T) {
	gatewaytest.Run(t, newConformanceFake)
}

func newGateway(srv *slacktest.Server, bot string, log *slog.Logger) *slack.Gateway {
	return slack.New(slack.Config{BotToken: bot, AppToken: appToken, APIURL: srv.URL(), AllowGroups: true,
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond, EditInterval: 10 * time.Millisecond,
		PingInterval: 5 * time.Second}, log)
}

func shown(srv *slacktest.Server, channel string) []gatewaytest.Message {
	var out []gatewaytest.Message
	for _, m := range srv.Sent(channel) {
		if !m.Ephemeral {
			out = append(out, gatewaytest.Message{ID: m.TS, Text: m.Shown(), Pings: m.Pings()})
		}
	}
	return out
}

func newConformanceFake(t *testing.T) *gatewaytest.Fake {
	srv := slacktest.New(botToken, appToken)
	t.Cleanup(srv.Close)
	dm := slacktest.DM(owner)
	return &gatewaytest.Fake{
		Name:      "slack",
		Token:     botToken,
		New:       func(tok string, log *slog.Logger) gateways.Gateway { return newGateway(srv, tok, log) },
		Limit:     4000,
		Measure:   utf8.RuneCountInString,
		OwnerChat: slacktest.TeamID + "/" + dm,
		// While latch is down Slack gives up on the event: the message is
		// in the conversation's history, which the next start reads.
		FromOwner:    func(text string, down bool) string { return srv.Post(owner, dm, text, !down) },
		FromStranger: func(text string) { srv.SendDM(stranger, text) },
		FromOther:    func(text string) { srv.Post(other, room, "<@"+slacktest.BotUserID+"> "+text, true) },
		Redeliver:    srv.Redeliver,
		ToOwner:      func() []gatewaytest.Message { return shown(srv, dm) },
		ToStranger:   func() []gatewaytest.Message { return shown(srv, slacktest.DM(stranger)) },
		ToOther:      func() []gatewaytest.Message { return shown(srv, room) },
		Press: func(ts, data string) (func() int, error) {
			before := answers(srv, ts)
			srv.Press(owner, dm, ts, data)
			return func() int { return answers(srv, ts) - before }, nil
		},
		FailSends: func(status, n, retryAfter int) {
			srv.Inject("chat.postMessage", slacktest.Fault{Status: status, RetryAfter: retryAfter}, n)
		},
		ClearFaults: func() { srv.ClearFaults("chat.postMessage") },
		Sends:       func() int { return srv.Count("chat.postMessage") },
	}
}

// answers counts the answers to presses on the message ts: edits of it
// and notices shown to the presser.
func answers(srv *slacktest.Server, ts string) int {
	n := len(srv.Calls("chat.postEphemeral"))
	for _, c := range srv.Calls("chat.update") {
		if c.Params.Get("ts") == ts {
			n++
		}
	}
	return n
}

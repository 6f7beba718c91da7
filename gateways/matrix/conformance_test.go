package matrix_test

import (
	"log/slog"
	"testing"
	"time"

	"github.com/latchd/latch/gateways"
	"github.com/latchd/latch/gateways/gatewaytest"
	"github.com/latchd/latch/gateways/matrix"
	"github.com/latchd/latch/gateways/matrix/matrixtest"
	"github.com/latchd/latch/turn"
)

const (
	token    = "syt_bGF0Y2g_latchTestAccessToken_0000"
	owner    = "@owner:" + matrixtest.Domain
	stranger = "@stranger:" + matrixtest.Domain
	other    = "@other:" + matrixtest.Domain
	dm       = "!dm:" + matrixtest.Domain
	strDM    = "!strangerdm:" + matrixtest.Domain
	group    = "!group:" + matrixtest.Domain
)

// TestConformance runs the suite every adapter passes against the fake
// homeserver (unencrypted rooms).
func TestConformance(t *testing.T) {
	gatewaytest.Run(t, newConformanceFake)
}

func newGateway(srv *matrixtest.Server, tok string, log *slog.Logger) *matrix.Gateway {
	return matrix.New(matrix.Config{Homeserver: srv.URL(), UserID: matrixtest.Bot, AccessToken: tok, AllowGroups: true,
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond, EditInterval: 10 * time.Millisecond,
		SyncTimeout: 2 * time.Second}, log)
}

// rooms sets up the owner's DM, a stranger's DM and a group with the
// owner and another user, the bot in all of them.
func rooms(srv *matrixtest.Server) {
	srv.Room(dm, matrixtest.Bot, owner)
	srv.Room(strDM, matrixtest.Bot, stranger)
	srv.Room(group, matrixtest.Bot, owner, other)
}

func shown(srv *matrixtest.Server, room string) []gatewaytest.Message {
	var out []gatewaytest.Message
	for _, m := range srv.Sent(room) {
		_, mentions := m.Content["m.mentions"].(map[string]any)
		out = append(out, gatewaytest.Message{ID: m.ID, Text: m.Body, Pings: !mentions})
	}
	return out
}

func newConformanceFake(t *testing.T) *gatewaytest.Fake {
	srv := matrixtest.New(token)
	t.Cleanup(srv.Close)
	rooms(srv)
	return &gatewaytest.Fake{
		Name:  "matrix",
		Token: token,
		New:   func(tok string, log *slog.Logger) gateways.Gateway { return newGateway(srv, tok, log) },
		Limit: 12 << 10,
		Measure: func(s string) int {
			return len(s)
		},
		OwnerChat:    dm,
		FromOwner:    func(text string, _ bool) string { return srv.Text(owner, dm, text) },
		FromStranger: func(text string) { srv.Text(stranger, strDM, text) },
		FromOther:    func(text string) { srv.Text(other, group, text) },
		Redeliver:    srv.Redeliver,
		ToOwner:      func() []gatewaytest.Message { return shown(srv, dm) },
		ToStranger:   func() []gatewaytest.Message { return shown(srv, strDM) },
		ToOther:      func() []gatewaytest.Message { return shown(srv, group) },
		Press: func(ev, data string) (func() int, error) {
			before := answers(srv, ev)
			srv.React(owner, dm, ev, reaction(data))
			return func() int { return answers(srv, ev) - before }, nil
		},
		FailSends: func(status, n, retryAfter int) {
			srv.Inject("send", matrixtest.Fault{Status: status, RetryAfterMS: retryAfter * 1000}, n)
		},
		ClearFaults: func() { srv.ClearFaults("send") },
		Sends:       func() int { return srv.Count("send") },
	}
}

func reaction(data string) string {
	k, _, _ := turn.ParsePayload(data)
	switch k {
	case turn.KindApprove, turn.KindLatchOK:
		return "✅"
	case turn.KindAlways:
		return "🔁"
	}
	return "❌"
}

// answers counts the answers to presses on the message ev: its edits and
// the notices sent.
func answers(srv *matrixtest.Server, ev string) int {
	n := 0
	for _, m := range srv.Sent(dm) {
		if m.ID == ev {
			n += m.Edits
		}
		if m.Type == "m.notice" {
			n++
		}
	}
	return n
}

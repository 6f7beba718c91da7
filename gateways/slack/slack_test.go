package slack_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latchd/latch/gateways"
	"github.com/latchd/latch/gateways/internal/adaptertest"
	"github.com/latchd/latch/gateways/slack"
	"github.com/latchd/latch/gateways/slack/slacktest"
	"github.com/latchd/latch/turn"
)

// memSink is a Sink in memory; while hold is set Ingest fails.
type memSink struct {
	mu     sync.Mutex
	cursor string
	msgs   []gateways.Message
	fail   bool
	failed int // Ingests refused while fail was set
}

func (s *memSink) Cursor(context.Context, string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cursor, nil
}

func (s *memSink) Ingest(_ context.Context, _, cursor string, msgs []gateways.Message) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail {
		s.failed++
		return errors.New("failing")
	}
	s.cursor = cursor
	s.msgs = append(s.msgs, msgs...)
	return nil
}

func (s *memSink) setFail(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail = on
}

func (s *memSink) texts() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, m := range s.msgs {
		out = append(out, m.Text)
	}
	return out
}

func (s *memSink) all() []gateways.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]gateways.Message(nil), s.msgs...)
}

// running starts a gateway on srv with sink; the test's cleanup stops it.
func running(t *testing.T, srv *slacktest.Server, sink *memSink) (*slack.Gateway, func() error) {
	t.Helper()
	logs := &adaptertest.LogBuffer{}
	g := newGateway(srv, botToken, adaptertest.Logger(t, logs))
	if err := g.Start(adaptertest.Context(t)); err != nil {
		t.Fatal(err)
	}
	stop := adaptertest.Run(t, func(ctx context.Context) error { return g.Run(ctx, sink) })
	t.Cleanup(func() {
		stop()
		if strings.Contains(logs.String(), botToken) || strings.Contains(logs.String(), appToken) {
			t.Error("a token is in the logs")
		}
	})
	return g, stop
}

func waitTexts(t *testing.T, sink *memSink, want ...string) {
	t.Helper()
	adaptertest.Eventually(t, "the messages "+strings.Join(want, ", "), func() bool {
		return strings.Join(sink.texts(), "\n") == strings.Join(want, "\n")
	})
}

// TestSilenceForOthers: bots (latch's own messages too), other
// workspaces, edits and threads are nothing; every envelope is still
// acknowledged, so Slack does not send it again.
func TestSilenceForOthers(t *testing.T) {
	srv := slacktest.New(botToken, appToken)
	t.Cleanup(srv.Close)
	sink := &memSink{}
	g, _ := running(t, srv, sink)
	dm := slacktest.DM(owner)
	srv.Event(map[string]any{"type": "message", "channel": dm, "user": "U0OTHERBOT", "bot_id": "B0OTHER", "text": "a bot", "ts": "1700000000.100000", "channel_type": "im"})
	srv.Event(map[string]any{"type": "message", "channel": dm, "user": slacktest.BotUserID, "text": "myself", "ts": "1700000000.100001", "channel_type": "im"})
	srv.Event(map[string]any{"type": "message", "subtype": "message_changed", "channel": dm, "ts": "1700000000.100002", "channel_type": "im"})
	srv.Event(map[string]any{"type": "message", "channel": dm, "user": owner.ID, "text": "in a thread", "ts": "1700000000.100003", "thread_ts": "1700000000.000001", "channel_type": "im"})
	srv.SendDM(slacktest.User{ID: "U0FAR", Team: "T0ELSEWHERE"}, "another workspace")
	if _, err := g.Send(adaptertest.Context(t), slacktest.TeamID+"/"+dm, gateways.Reply{Text: "latch speaks"}); err != nil {
		t.Fatal(err)
	}
	srv.SendDM(owner, "last")
	waitTexts(t, sink, "last")
	adaptertest.Eventually(t, "every envelope acknowledged", func() bool { return srv.Unacked() == 0 })
	m := sink.all()[0]
	if m.ChatID != slacktest.TeamID+"/"+dm || m.UserID != slacktest.TeamID+"/"+owner.ID || m.ChatType != gateways.ChatPrivate {
		t.Errorf("the message is %+v, want team-qualified chat and user", m)
	}
	if _, err := g.Send(adaptertest.Context(t), "T0ELSEWHERE/"+dm, gateways.Reply{Text: "x"}); !errors.Is(err, gateways.ErrRejected) {
		t.Errorf("Send to another workspace's conversation = %v, want ErrRejected", err)
	}
}

// TestChannelsOnlyWithAllowGroups: a mention in a channel is a message
// only with AllowGroups, and without the mention.
func TestChannelsOnlyWithAllowGroups(t *testing.T) {
	srv := slacktest.New(botToken, appToken)
	t.Cleanup(srv.Close)
	sink := &memSink{}
	g := slack.New(slack.Config{BotToken: botToken, AppToken: appToken, APIURL: srv.URL(), PingInterval: 5 * time.Second}, nil)
	if err := g.Start(adaptertest.Context(t)); err != nil {
		t.Fatal(err)
	}
	adaptertest.Run(t, func(ctx context.Context) error { return g.Run(ctx, sink) })
	srv.Post(other, room, "<@"+slacktest.BotUserID+"> in a channel", true)
	srv.SendDM(owner, "direct")
	waitTexts(t, sink, "direct")

	srv2 := slacktest.New(botToken, appToken)
	t.Cleanup(srv2.Close)
	sink2 := &memSink{}
	running(t, srv2, sink2)
	srv2.Post(other, room, "<@"+slacktest.BotUserID+"> in a channel", true)
	waitTexts(t, sink2, "in a channel")
	if m := sink2.all()[0]; m.ChatType != gateways.ChatGroup || m.ChatID != slacktest.TeamID+"/"+room {
		t.Errorf("the mention is %+v", m)
	}
}

// TestAckAfterIngest: an envelope whose Ingest fails is not
// acknowledged, so latch stopped then gets it again at the next start; it
// is acknowledged once Ingest works, and handled once although Slack sent
// it again meanwhile.
func TestAckAfterIngest(t *testing.T) {
	srv := slacktest.New(botToken, appToken)
	t.Cleanup(srv.Close)
	sink := &memSink{}
	_, stop := running(t, srv, sink)
	srv.SendDM(owner, "first")
	waitTexts(t, sink, "first")
	adaptertest.Eventually(t, "the first acknowledged", func() bool { return srv.Unacked() == 0 })
	sink.setFail(true)
	srv.SendDM(owner, "lost if acknowledged")
	adaptertest.Eventually(t, "two Ingests to fail", func() bool {
		sink.mu.Lock()
		defer sink.mu.Unlock()
		return sink.failed >= 2
	})
	stop()
	if n := srv.Unacked(); n != 1 {
		t.Errorf("%d envelopes unacknowledged after the failed Ingests, want 1", n)
	}
	sink.setFail(false)
	running(t, srv, sink)
	waitTexts(t, sink, "first", "lost if acknowledged")
	sink.setFail(true)
	ts := srv.SendDM(owner, "kept")
	adaptertest.Eventually(t, "the envelope to wait", func() bool { return srv.Unacked() == 1 })
	srv.Redeliver(ts)
	srv.DropSockets() // and again at the next connection
	sink.setFail(false)
	waitTexts(t, sink, "first", "lost if acknowledged", "kept")
	adaptertest.Eventually(t, "everything acknowledged", func() bool { return srv.Unacked() == 0 })
	srv.SendDM(owner, "after")
	waitTexts(t, sink, "first", "lost if acknowledged", "kept", "after")
}

// TestSocketFaults: a malformed envelope, an oversized frame, a
// disconnect envelope and a dropped socket do not stop the gateway.
func TestSocketFaults(t *testing.T) {
	srv := slacktest.New(botToken, appToken)
	t.Cleanup(srv.Close)
	sink := &memSink{}
	running(t, srv, sink)
	srv.SendDM(owner, "one")
	waitTexts(t, sink, "one")
	srv.Raw(`{"type":"events_api","envelope_id":"bad","payload":{"event":`)
	srv.Raw(`not json`)
	srv.Raw(`{"type":"no_such_type","envelope_id":"x"}`)
	srv.SendDM(owner, "two")
	waitTexts(t, sink, "one", "two")
	// A frame over the read limit is not read into memory: the socket
	// drops and a new one opens.
	opened := srv.Count("apps.connections.open")
	srv.Raw(`{"type":"events_api","envelope_id":"huge","payload":"` + strings.Repeat("x", 2<<20) + `"}`)
	adaptertest.Eventually(t, "a new socket after the oversized frame", func() bool {
		return srv.Count("apps.connections.open") > opened
	})
	srv.Disconnect("refresh_requested")
	srv.SendDM(owner, "three")
	waitTexts(t, sink, "one", "two", "three")
	srv.DropSockets()
	srv.SendDM(owner, "four")
	waitTexts(t, sink, "one", "two", "three", "four")
}

// started is a gateway Started on a fake of its own, not yet running.
func started(t *testing.T) (*slacktest.Server, *slack.Gateway, context.Context) {
	t.Helper()
	srv := slacktest.New(botToken, appToken)
	t.Cleanup(srv.Close)
	g := newGateway(srv, botToken, nil)
	ctx := adaptertest.Context(t)
	if err := g.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return srv, g, ctx
}

// TestRevokedAppToken: invalid_auth when reconnecting ends Run with
// ErrUnauthorized.
func TestRevokedAppToken(t *testing.T) {
	srv, g, ctx := started(t)
	srv.RefuseSockets(true)
	err := g.Run(ctx, &memSink{})
	if !errors.Is(err, gateways.ErrUnauthorized) || strings.Contains(err.Error(), appToken) {
		t.Fatalf("Run with a revoked app token = %v, want ErrUnauthorized without the token", err)
	}
	if !strings.Contains(err.Error(), "app_token") {
		t.Errorf("Run's error %q does not name the app token", err)
	}
	bad := slack.New(slack.Config{BotToken: botToken, AppToken: "xapp-wrong", APIURL: srv.URL()}, nil)
	if err := bad.Start(ctx); !errors.Is(err, gateways.ErrUnauthorized) {
		t.Errorf("Start with a bad app token = %v, want ErrUnauthorized", err)
	}
}

// TestRevokedBotToken: the bot token refused to a Web API call while the
// socket runs (Socket Mode needs only the app token, so nothing else would
// notice) ends Run with ErrUnauthorized naming it; the send that saw it
// fails, not as ErrRejected, so its reply stays in the outbox.
func TestRevokedBotToken(t *testing.T) {
	srv, g, ctx := started(t)
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx, &memSink{}) }()
	adaptertest.Eventually(t, "the socket", func() bool { return srv.Sockets() == 1 })
	srv.RefuseBotToken(true)
	_, err := g.Send(ctx, slacktest.TeamID+"/"+slacktest.DM(owner), gateways.Reply{Text: "hello"})
	if !errors.Is(err, gateways.ErrUnauthorized) || errors.Is(err, gateways.ErrRejected) {
		t.Errorf("Send with a revoked bot token = %v, want ErrUnauthorized, not ErrRejected", err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, gateways.ErrUnauthorized) || !strings.Contains(err.Error(), "bot_token") || strings.Contains(err.Error(), botToken) {
			t.Errorf("Run = %v, want ErrUnauthorized naming bot_token, without the token", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run goes on with a revoked bot token")
	}
}

// TestFilesBothWays: a file shared with latch downloads with the bot
// token and within the cap; a file latch sends goes up by the external
// upload flow.
func TestFilesBothWays(t *testing.T) {
	srv := slacktest.New(botToken, appToken)
	t.Cleanup(srv.Close)
	sink := &memSink{}
	g, _ := running(t, srv, sink)
	ctx := adaptertest.Context(t)
	f := srv.AddFile("notes.txt", "text/plain", []byte("hello file"))
	srv.SendDM(owner, "see attached", f)
	waitTexts(t, sink, "see attached")
	m := sink.all()[0]
	if len(m.Files) != 1 || m.Files[0].Name != "notes.txt" || m.Files[0].Size != 10 {
		t.Fatalf("files %+v", m.Files)
	}
	var b bytes.Buffer
	if err := g.Download(ctx, m.Files[0], &b, 1<<20); err != nil || b.String() != "hello file" {
		t.Fatalf("Download = %q, %v", b.String(), err)
	}
	b.Reset()
	if err := g.Download(ctx, m.Files[0], &b, 4); !errors.Is(err, slack.ErrFileTooLarge) {
		t.Errorf("Download over the cap = %v", err)
	}
	big := m.Files[0]
	big.Size = 0 // not announced: the cap holds on the bytes
	if err := g.Download(ctx, big, &b, 4); !errors.Is(err, slack.ErrFileTooLarge) {
		t.Errorf("Download over the cap, size unannounced = %v", err)
	}
	dm := slacktest.DM(owner)
	if err := g.SendFile(ctx, slacktest.TeamID+"/"+dm, turn.File{Name: "../out.txt", Data: []byte("from latch")}, ""); err != nil {
		t.Fatal(err)
	}
	var got *slacktest.File
	for _, m := range srv.History(dm) {
		if len(m.Files) == 1 && m.BotID == slacktest.BotID {
			got = &m.Files[0]
		}
	}
	if got == nil || got.Name != "out.txt" || string(got.Data()) != "from latch" {
		t.Errorf("uploaded %+v", got)
	}
}

// TestButtonsGoOnceAnswered: an approval's buttons carry the payloads;
// answering it with an outcome edits them away.
func TestButtonsGoOnceAnswered(t *testing.T) {
	srv := slacktest.New(botToken, appToken)
	t.Cleanup(srv.Close)
	sink := &memSink{}
	g, _ := running(t, srv, sink)
	ctx := adaptertest.Context(t)
	chat := slacktest.TeamID + "/" + slacktest.DM(owner)
	ev := g.RenderTurn(ctx, chat, "")
	ev.Approval(turn.Approval{ID: "k1", Tool: "bash", Summary: "rm <!channel>", Detail: "rm <!channel>"})
	ev.(interface{ End() }).End()
	var req slacktest.Message
	adaptertest.Eventually(t, "the request", func() bool {
		for _, m := range srv.Sent(slacktest.DM(owner)) {
			if m.HasButtons() {
				req = m
				return true
			}
		}
		return false
	})
	if req.Pings() || !strings.Contains(string(req.Blocks), turn.Payload(turn.KindApprove, "k1")) {
		t.Fatalf("request %q blocks %s", req.Text, req.Blocks)
	}
	srv.Press(owner, slacktest.DM(owner), req.TS, turn.Payload(turn.KindApprove, "k1"))
	adaptertest.Eventually(t, "the press", func() bool { return len(sink.all()) == 1 })
	cb := sink.all()[0].Callback
	if cb == nil || cb.Data != turn.Payload(turn.KindApprove, "k1") || cb.MessageID != req.TS {
		t.Fatalf("press %+v", cb)
	}
	if err := g.AnswerCallback(ctx, chat, *cb, "Approved", "✓ approved"); err != nil {
		t.Fatal(err)
	}
	for _, m := range srv.Sent(slacktest.DM(owner)) {
		if m.TS == req.TS && (m.HasButtons() || !strings.Contains(m.Shown(), "✓ approved") || !strings.Contains(m.Shown(), "Allow")) {
			t.Errorf("after the answer: %q %s", m.Shown(), m.Blocks)
		}
	}
}

// TestStreamingByUpdate: a streamed answer is one message, edited, and
// ends as the whole answer.
func TestStreamingByUpdate(t *testing.T) {
	srv := slacktest.New(botToken, appToken)
	t.Cleanup(srv.Close)
	g, _ := running(t, srv, &memSink{})
	ctx := adaptertest.Context(t)
	dm := slacktest.DM(owner)
	asked := srv.SendDM(owner, "say hello")
	ev := g.RenderTurn(ctx, slacktest.TeamID+"/"+dm, asked)
	reactions := func() []string {
		for _, m := range srv.History(dm) {
			if m.TS == asked {
				return m.Reactions
			}
		}
		return nil
	}
	adaptertest.Eventually(t, "the working reaction", func() bool { return len(reactions()) == 1 })
	ev.Text("Hello")
	adaptertest.Eventually(t, "the first part", func() bool { return len(srv.Sent(dm)) == 1 })
	ev.Text(" **world** <!here>")
	ev.Final("Hello **world** <!here>")
	ev.(interface{ End() }).End()
	sent := srv.Sent(dm)
	if len(sent) != 1 || sent[0].Text != "Hello *world* &lt;!here&gt;" || sent[0].Pings() {
		t.Errorf("sent %+v", sent)
	}
	if srv.Count("chat.update") == 0 {
		t.Error("no chat.update")
	}
	if r := reactions(); len(r) != 0 {
		t.Errorf("the working reaction stays after the turn: %v", r)
	}
}

// TestFinalEditTriedAgain: the final edit of a streamed answer that fails
// transiently is made again; one that keeps failing is followed by a
// notice, so the loss is not silent.
func TestFinalEditTriedAgain(t *testing.T) {
	srv := slacktest.New(botToken, appToken)
	t.Cleanup(srv.Close)
	g, _ := running(t, srv, &memSink{})
	ctx := adaptertest.Context(t)
	dm := slacktest.DM(owner)
	for _, tt := range []struct {
		faults int
		notice bool
	}{{1, false}, {-1, true}} {
		before := len(srv.Sent(dm))
		ev := g.RenderTurn(ctx, slacktest.TeamID+"/"+dm, "")
		ev.Text("Hello")
		adaptertest.Eventually(t, "the first part", func() bool { return len(srv.Sent(dm)) == before+1 })
		srv.Inject("chat.update", slacktest.Fault{Status: 500}, tt.faults)
		ev.Final("Hello world")
		ev.(interface{ End() }).End()
		srv.ClearFaults("chat.update")
		sent := srv.Sent(dm)[before:]
		if tt.notice {
			if len(sent) != 2 || !strings.Contains(sent[1].Shown(), "could not be delivered") {
				t.Errorf("after a final edit that kept failing: %+v", sent)
			}
		} else if len(sent) != 1 || sent[0].Shown() != "Hello world" {
			t.Errorf("after one failed final edit: %+v", sent)
		}
	}
}

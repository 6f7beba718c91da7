package discord

import (
	"bytes"
	"fmt"
	stdlog "log"
	"os"
	"strings"
	"testing"

	"github.com/bwmarrin/discordgo"

	"github.com/latchd/latch/gateways"
	"github.com/latchd/latch/gateways/discord/discordtest"
)

// TestTokenNeverLeaks drives the gateway through the failures it handles —
// answers that echo the token, transport errors whose *url.Error quotes an
// interaction URL, gateway payloads discordgo logs whole, a server that
// goes away — and checks that neither the bot token, its HMAC part nor an
// interaction token shows up in a log line, a returned error (however it
// is printed) or Info.
func TestTokenNeverLeaks(t *testing.T) {
	var std bytes.Buffer // discordgo's fallback logger, should it be used
	stdlog.SetOutput(&std)
	t.Cleanup(func() { stdlog.SetOutput(os.Stderr) })

	srv := newFake(t)
	g, logs := started(t, srv)
	sink := newSink("")
	stop := run(t, g, sink)
	ctx := testContext(t)
	ch := srv.DMChannel(alice)
	var outputs []string
	collect := func(err error) {
		outputs = append(outputs, g.Info().LastError)
		if err != nil {
			outputs = append(outputs, err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err))
		}
	}

	faults := []discordtest.Fault{
		{Status: 400, Code: 50035, Message: "Invalid token " + testToken},
		{Status: 500, Message: "Bot " + testToken},
		{Status: 502, Body: "<html>" + testToken + "</html>", Times: 4}, // discordgo retries a 502
		{Status: 429, RetryAfter: 0.01, Message: "slow down, " + testToken, Times: maxAttempts},
		{Status: 403, Code: 50007, Message: "Cannot send messages to this user"},
		{Hangup: true},
		{Status: 200, Body: "not json " + testToken},
	}
	for _, f := range faults {
		srv.Inject(discordtest.RouteCreateMessage, f)
		_, err := g.Send(ctx, ch, gateways.Reply{Text: "x"})
		collect(err)
	}

	// An interaction's token is in its callback URL.
	m, _, press := approvalPressed(t, srv, g, sink, "approve:k3x9p")
	srv.Inject(discordtest.RouteInteractionCallback, discordtest.Fault{Hangup: true})
	collect(g.AnswerCallback(ctx, m.ChatID, *m.Callback, "", "✓ approved"))

	// Payloads discordgo does not expect are logged with their content.
	srv.SendRaw(`{"op":99,"d":{"token":"` + testToken + `"}}`)
	srv.SendRaw(`{"op":0,"t":"MESSAGE_CREATE","s":99,"d":{"id":"` + testToken + `"}}`)
	srv.SendDM(alice, "marker")
	sink.waitStored(t, 3)
	routeLibraryLog(discordgo.LogError, 1, "identify %s", "Bot "+testToken)

	// A gateway connection that fails.
	srv.CloseGateway(discordtest.CloseUnknownError, "Unknown error "+testToken)
	waitFake(t, srv, "a RESUME", func() bool { return len(srv.Resumes()) > 0 })
	srv.SendDM(alice, "marker 2")
	sink.waitStored(t, 4)

	// A server that is gone: REST fails in the transport. (The gateway is
	// closed first: discordgo's reconnect loop, once running, cannot be
	// stopped, and would outlive the test.)
	collect(stop())
	srv.Close()
	_, err := g.Send(ctx, ch, gateways.Reply{Text: "x"})
	collect(err)

	g2, logs2 := newGateway(t, srv)
	err = g2.Start(ctx)
	collect(err)
	g3, logs3 := newGateway(t, srv, func(c *Config) { c.Token = testToken + "x" })
	collect(g3.Start(ctx))

	all := strings.Join(append(outputs, logs.String(), logs2.String(), logs3.String(), std.String()), "\n")
	_, hmac, _ := strings.Cut(strings.TrimPrefix(testToken, strings.Split(testToken, ".")[0]+"."), ".")
	for _, secret := range []string{testToken, hmac, press.Token} {
		if strings.Contains(all, secret) {
			t.Errorf("a secret (%.12s…) leaked:\n%s", secret, all)
		}
	}
	if !strings.Contains(all, redacted) {
		t.Errorf("nothing was scrubbed: the test did not exercise a leak:\n%s", all)
	}
	if std.Len() != 0 {
		t.Errorf("discordgo used the standard logger:\n%s", &std)
	}
	if len(logs.lines("discordgo:", "unknown Op")) == 0 {
		t.Errorf("discordgo's log did not reach the gateway's logger:\n%s", logs)
	}
}

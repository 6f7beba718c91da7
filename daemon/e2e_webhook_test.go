package daemon

import (
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/latchd/latch/config"
	"github.com/latchd/latch/gateways/telegram"
	"github.com/latchd/latch/gateways/telegram/telegramtest"
)

// webhookEnv is an env whose config.toml (as latch init wrote it, with its
// random webhook secret) is switched to webhook mode on a free loopback
// port. It returns the webhook URL and the secret.
func webhookEnv(t *testing.T) (e *env, url, secret string) {
	t.Helper()
	e = newEnv(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	url = "http://" + addr + "/tg/updates"
	// As a user would: `latch config set` adds a random secret with the URL.
	if _, err := config.Set(e.home, "telegram.webhook_listen", addr); err != nil {
		t.Fatal(err)
	}
	if res, err := config.Set(e.home, "telegram.webhook_url", url); err != nil || !res.AddedWebhookSecret {
		t.Fatalf("config set telegram.webhook_url: %+v, %v", res, err)
	}
	cfg := e.config()
	if cfg.Telegram.WebhookURL != url || cfg.Telegram.WebhookSecret == "" {
		t.Fatalf("config.toml not in webhook mode: url %q, secret set %t", cfg.Telegram.WebhookURL, cfg.Telegram.WebhookSecret != "")
	}
	secret = cfg.Telegram.WebhookSecret
	e.tg.SetWebhookRetry(telegramtest.WebhookRetry{Min: 10 * time.Millisecond, Max: 100 * time.Millisecond})
	t.Cleanup(func() {
		if strings.Contains(e.logs.String(), secret) {
			t.Errorf("the webhook secret appears in the logs")
		}
	})
	return e, url, secret
}

func TestE2EWebhookPairCommandAndStranger(t *testing.T) {
	e, url, secret := webhookEnv(t)
	e.start()
	if got := e.tg.Webhook(); got != url {
		t.Fatalf("webhook = %q, want %q", got, url)
	}
	if calls := e.tg.Calls("setWebhook"); len(calls) != 1 || calls[0].Params["secret_token"] != secret {
		t.Fatalf("setWebhook calls: %d, want one with the secret from config.toml", len(calls))
	}

	e.pair()
	e.say(stranger, "/pair ABCD-2345")
	last := e.say(stranger, "!id")
	e.waitConfirmed(last)
	e.say(owner, "!echo hi from the webhook")
	if m := e.waitReply(owner.ID, "hi from the webhook"); !strings.Contains(m.Current(), "exit 0") {
		t.Errorf("command reply = %q", m.Current())
	}

	// Someone who found the URL forges the owner's command: same 404 as
	// for any other stray request, and nothing runs.
	forged := `{"update_id":99999,"message":{"message_id":9,"date":1700000000,"chat":{"id":1001,"type":"private"},` +
		`"from":{"id":1001,"is_bot":false,"first_name":"Owner"},"text":"!echo forged"}}`
	for i, guess := range []string{"", "not-the-secret", secret[:len(secret)-1]} {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(forged))
		req.Header.Set("Content-Type", "application/json")
		if guess != "" {
			req.Header.Set(telegram.SecretHeader, guess)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("forged delivery %d (missing, wrong, one character short) answered %d, want 404", i, resp.StatusCode)
		}
	}
	e.say(owner, "!echo after the forgeries")
	e.waitReply(owner.ID, "after the forgeries")
	for _, m := range e.tg.Sent() {
		if strings.Contains(m.Current(), "forged") {
			t.Errorf("a forged update ran: %q", m.Current())
		}
	}
	if got := e.tg.SentTo(stranger.ID); len(got) != 0 {
		t.Errorf("stranger got %d replies", len(got))
	}
	st := e.status()
	if st.Latch == nil || st.StrangersDropped != 2 || !st.Connected {
		t.Errorf("status = %+v latch=%+v", st, st.Latch)
	}
	if n := e.tg.Count("getUpdates"); n != 0 {
		t.Errorf("getUpdates called %d times in webhook mode", n)
	}
}

func TestE2EWebhookRestartAndRepeats(t *testing.T) {
	e, url, _ := webhookEnv(t)
	r := e.start()
	e.pair()
	e.say(owner, "!echo one")
	e.waitReply(owner.ID, "one")
	r.stop(t)
	if got := e.tg.Webhook(); got != url {
		t.Errorf("webhook after stop = %q, want it left set", got)
	}

	// Down: Telegram keeps the update and keeps trying.
	e.say(owner, "!echo two")
	waitFor(t, func() bool {
		return slices.ContainsFunc(e.tg.WebhookDeliveries(), func(d telegramtest.WebhookDelivery) bool {
			return d.Err == "Connection refused"
		})
	})
	e.start()
	e.waitReply(owner.ID, "two")

	// The 200 for "three" is lost: Telegram delivers it again.
	e.tg.LoseWebhookResponses(1)
	three := e.say(owner, "!echo three")
	e.waitReply(owner.ID, "three")
	e.waitConfirmed(three)
	e.say(owner, "!echo four")
	e.waitReply(owner.ID, "four")

	n := 0
	for _, d := range e.tg.WebhookDeliveries() {
		if d.UpdateID == three {
			n++
		}
	}
	if n != 2 {
		t.Errorf("update %d delivered %d times, want 2 (the test needs the repeat)", three, n)
	}
	for _, s := range []string{"Paired", "one", "two", "three", "four"} {
		if c := e.repliesTo(owner.ID, s); c != 1 {
			t.Errorf("%d replies starting %q, want 1:%s", c, s, e.describeSent())
		}
	}
}

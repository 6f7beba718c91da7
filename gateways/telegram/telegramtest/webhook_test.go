package telegramtest_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/latchd/latch/gateways/telegram/telegramtest"
)

// receiver is a webhook endpoint that records deliveries and answers with
// the statuses it is given in turn (then 200).
type receiver struct {
	srv *httptest.Server

	mu       sync.Mutex
	statuses []int
	got      []delivery
}

type delivery struct {
	secret, contentType string
	update              map[string]json.RawMessage
}

func newReceiver(t *testing.T, statuses ...int) *receiver {
	t.Helper()
	r := &receiver{statuses: statuses}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		var u map[string]json.RawMessage
		_ = json.Unmarshal(body, &u)
		r.mu.Lock()
		r.got = append(r.got, delivery{req.Header.Get(telegramtest.SecretHeader), req.Header.Get("Content-Type"), u})
		status := http.StatusOK
		if len(r.statuses) > 0 {
			status, r.statuses = r.statuses[0], r.statuses[1:]
		}
		r.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) deliveries() []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]delivery(nil), r.got...)
}

// setWebhook calls the setWebhook method with raw parameters.
func setWebhook(bot *tgbotapi.BotAPI, params tgbotapi.Params) error {
	_, err := bot.MakeRequest("setWebhook", params)
	return err
}

func quickRetry(srv *telegramtest.Server, giveUp int) {
	srv.SetWebhookRetry(telegramtest.WebhookRetry{Min: 2 * time.Millisecond, Max: 20 * time.Millisecond, GiveUpAfter: giveUp})
}

func TestWebhookDeliversInOrderWithSecret(t *testing.T) {
	srv := newServer(t)
	quickRetry(srv, 0)
	bot := newBot(t, srv)
	rcv := newReceiver(t, http.StatusInternalServerError, http.StatusNotFound)
	a := srv.SendText(telegramtest.Private(alice), alice, "first")
	b := srv.SendText(telegramtest.Private(alice), alice, "second")
	if err := setWebhook(bot, tgbotapi.Params{"url": rcv.srv.URL + "/hook", "secret_token": "s3cret_-X", "max_connections": "1"}); err != nil {
		t.Fatal(err)
	}
	if err := srv.Wait(testContext(t), func() bool { return srv.Pending() == 0 }); err != nil {
		t.Fatal(err)
	}
	got := rcv.deliveries()
	// Two failures repeat the first update; the second waits its turn.
	var ids []int
	for _, d := range got {
		var id int
		_ = json.Unmarshal(d.update["update_id"], &id)
		ids = append(ids, id)
		if d.secret != "s3cret_-X" || d.contentType != "application/json" {
			t.Errorf("delivery headers: secret %q, type %q", d.secret, d.contentType)
		}
	}
	if want := []int{a, a, a, b}; !slices.Equal(ids, want) {
		t.Errorf("delivered update ids %v, want %v", ids, want)
	}
	if srv.ConfirmedOffset() != b+1 {
		t.Errorf("confirmed offset %d, want %d", srv.ConfirmedOffset(), b+1)
	}
	info, err := bot.GetWebhookInfo()
	if err != nil || info.URL != rcv.srv.URL+"/hook" || info.PendingUpdateCount != 0 || info.MaxConnections != 1 ||
		info.LastErrorMessage != "Wrong response from the webhook: 404 Not Found" || info.LastErrorDate == 0 {
		t.Errorf("webhook info = %+v, %v", info, err)
	}
	// While the webhook is set, getUpdates is refused.
	_, err = bot.GetUpdates(tgbotapi.UpdateConfig{})
	if e := apiError(t, err); e.Code != 409 || !strings.Contains(e.Message, "can't use getUpdates method while webhook is active") {
		t.Errorf("getUpdates with a webhook: %d %q", e.Code, e.Message)
	}
}

func TestWebhookGivesUp(t *testing.T) {
	srv := newServer(t)
	quickRetry(srv, 3)
	bot := newBot(t, srv)
	rcv := newReceiver(t, 500, 500, 500)
	lost := srv.SendText(telegramtest.Private(alice), alice, "lost")
	kept := srv.SendText(telegramtest.Private(alice), alice, "kept")
	if err := setWebhook(bot, tgbotapi.Params{"url": rcv.srv.URL}); err != nil {
		t.Fatal(err)
	}
	if err := srv.Wait(testContext(t), func() bool { return srv.Pending() == 0 }); err != nil {
		t.Fatal(err)
	}
	var ids []int
	for _, d := range srv.WebhookDeliveries() {
		ids = append(ids, d.UpdateID)
	}
	if want := []int{lost, lost, lost, kept}; !slices.Equal(ids, want) {
		t.Errorf("attempts %v, want three for the update given up on, then the next", ids)
	}
}

func TestWebhookLostResponseIsRepeated(t *testing.T) {
	srv := newServer(t)
	quickRetry(srv, 0)
	bot := newBot(t, srv)
	rcv := newReceiver(t)
	srv.LoseWebhookResponses(1)
	id := srv.SendText(telegramtest.Private(alice), alice, "twice")
	if err := setWebhook(bot, tgbotapi.Params{"url": rcv.srv.URL}); err != nil {
		t.Fatal(err)
	}
	if err := srv.Wait(testContext(t), func() bool { return srv.Pending() == 0 }); err != nil {
		t.Fatal(err)
	}
	d := srv.WebhookDeliveries()
	if len(d) != 2 || d[0].UpdateID != id || d[1].UpdateID != id || !d[0].Lost || d[1].Lost || len(rcv.deliveries()) != 2 {
		t.Errorf("deliveries %+v, want the same update twice, the first answer lost", d)
	}
}

func TestSetWebhookValidates(t *testing.T) {
	srv := newServer(t)
	bot := newBot(t, srv)
	tests := []struct {
		name   string
		params tgbotapi.Params
		want   string
	}{
		{"http", tgbotapi.Params{"url": "http://hook.example/x"}, "An HTTPS URL must be provided"},
		{"port", tgbotapi.Params{"url": "https://hook.example:1234/x"}, "only on ports 80, 88, 443 or 8443"},
		{"secret charset", tgbotapi.Params{"url": "https://hook.example/x", "secret_token": "a:b"}, "secret token contains unallowed characters"},
		{"secret length", tgbotapi.Params{"url": "https://hook.example/x", "secret_token": strings.Repeat("a", 257)}, "secret token is too long"},
	}
	for _, tt := range tests {
		err := setWebhook(bot, tt.params)
		if e := apiError(t, err); e.Code != 400 || !strings.Contains(e.Message, tt.want) {
			t.Errorf("%s: %d %q, want 400 %q", tt.name, e.Code, e.Message, tt.want)
		}
	}
	if srv.Webhook() != "" {
		t.Errorf("a refused setWebhook left %q set", srv.Webhook())
	}
	for _, url := range []string{"https://hook.example:8443/x", "https://hook.example/x"} {
		if err := setWebhook(bot, tgbotapi.Params{"url": url, "secret_token": strings.Repeat("Z", 256)}); err != nil || srv.Webhook() != url {
			t.Errorf("setWebhook %s: %v (webhook %q)", url, err, srv.Webhook())
		}
	}
	// An empty url removes the webhook, as deleteWebhook does.
	if err := setWebhook(bot, tgbotapi.Params{"url": ""}); err != nil || srv.Webhook() != "" {
		t.Errorf("setWebhook with no url: %v, webhook %q", err, srv.Webhook())
	}
}

func TestWebhookOnlyToLoopback(t *testing.T) {
	srv := newServer(t)
	quickRetry(srv, 1)
	bot := newBot(t, srv)
	srv.SendText(telegramtest.Private(alice), alice, "stays here")
	if err := setWebhook(bot, tgbotapi.Params{"url": "https://192.0.2.1/hook"}); err != nil {
		t.Fatal(err)
	}
	if err := srv.Wait(testContext(t), func() bool { return len(srv.WebhookDeliveries()) == 1 }); err != nil {
		t.Fatal(err)
	}
	if d := srv.WebhookDeliveries()[0]; d.Status != 0 || !strings.Contains(d.Err, "loopback") {
		t.Errorf("delivery to a public address = %+v, want it refused before dialling", d)
	}
}

func TestCloseStopsAHangingDelivery(t *testing.T) {
	srv := telegramtest.New(token)
	bot := newBot(t, srv)
	release, arrived := make(chan struct{}), make(chan struct{})
	var once sync.Once
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() { close(arrived) })
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer hang.Close()
	defer close(release)
	srv.SendText(telegramtest.Private(alice), alice, "hi")
	if err := setWebhook(bot, tgbotapi.Params{"url": hang.URL}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-arrived:
	case <-testContext(t).Done():
		t.Fatal("no delivery")
	}
	done := make(chan struct{})
	go func() { srv.Close(); close(done) }()
	select {
	case <-done:
	case <-testContext(t).Done():
		t.Fatal("Close did not return while a delivery hung")
	}
}

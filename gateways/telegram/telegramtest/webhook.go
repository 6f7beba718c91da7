package telegramtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/latchd/latch/gateways/internal/loopback"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"syscall"
	"time"
)

// SecretHeader is the header that carries a webhook's secret_token.
const SecretHeader = "X-Telegram-Bot-Api-Secret-Token"

// Webhook delivery defaults. Telegram waits longer between attempts; the
// fake is quick so tests are, and SetWebhookRetry changes it.
const (
	defaultRetryMin = 20 * time.Millisecond
	defaultRetryMax = 500 * time.Millisecond
	deliveryTimeout = 10 * time.Second
	maxSecretToken  = 256
)

var errNotLoopback = errors.New("telegramtest: webhooks are delivered to loopback addresses only")

// webhookState is the bot's webhook, as setWebhook left it.
type webhookState struct {
	url     string
	secret  string
	maxConn int
	// active is set by the setWebhook method: only then are updates
	// delivered. SetWebhook (a webhook set by someone else, at an address
	// tests cannot reach) leaves it false.
	active bool
	// epoch counts webhook changes, so a delivery that was under way when
	// the webhook changed does not count for the new one.
	epoch      int
	lastErrAt  int64
	lastErrMsg string

	retry      WebhookRetry
	loseAcks   int // the next loseAcks acknowledgements are "lost"
	deliveries []WebhookDelivery
}

// WebhookRetry is how the fake repeats a delivery that did not get a 2xx
// answer: after Min, then twice as long each time up to Max. After
// GiveUpAfter failed attempts the update is dropped, as Telegram gives up
// "after a reasonable number of attempts"; 0 means never (Telegram keeps
// undelivered updates for 24 hours, longer than any test).
type WebhookRetry struct {
	Min, Max    time.Duration
	GiveUpAfter int
}

// WebhookDelivery is one attempt to deliver an update to the webhook.
type WebhookDelivery struct {
	UpdateID int
	// Status is the HTTP status of the answer, 0 if there was none.
	Status int
	// Err describes a failure as getWebhookInfo's last_error_message does.
	Err string
	// Lost is set when the answer was a 2xx that LoseWebhookResponses
	// made the fake ignore, so the update is delivered again.
	Lost bool
	Time time.Time
}

// SetWebhook pretends another program set a webhook at url: getUpdates then
// fails with 409 until the bot calls deleteWebhook. Nothing is delivered to
// it; a bot that calls the setWebhook method gets deliveries.
func (s *Server) SetWebhook(url string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hook.url, s.hook.secret, s.hook.active = url, "", false
	s.hook.epoch++
	s.notifyLocked()
}

// Webhook is the URL of the webhook now set ("" if none).
func (s *Server) Webhook() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hook.url
}

// SetWebhookRetry changes how failed deliveries are repeated.
func (s *Server) SetWebhookRetry(r WebhookRetry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.Min <= 0 {
		r.Min = defaultRetryMin
	}
	r.Max = max(r.Max, r.Min)
	s.hook.retry = r
	s.notifyLocked()
}

// LoseWebhookResponses makes the fake ignore the next n successful webhook
// answers, as if they were lost on the way back: Telegram then delivers
// the same update again, with the same update_id.
func (s *Server) LoseWebhookResponses(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hook.loseAcks += n
}

// WebhookDeliveries returns every delivery attempt so far, oldest first.
func (s *Server) WebhookDeliveries() []WebhookDelivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.hook.deliveries)
}

func (s *Server) setWebhook(_ context.Context, p params) (any, *apiError) {
	raw := p["url"]
	if raw == "" {
		return s.deleteWebhook(context.Background(), p)
	}
	if aerr := checkWebhookURL(raw); aerr != nil {
		return nil, aerr
	}
	secret := p["secret_token"]
	if aerr := checkSecretToken(secret); aerr != nil {
		return nil, aerr
	}
	maxConn, aerr := p.int("max_connections", 40)
	if aerr != nil {
		return nil, aerr
	}
	var allowed []string
	if v := p["allowed_updates"]; v != "" && json.Unmarshal([]byte(v), &allowed) != nil {
		return nil, badRequest("can't parse allowed updates")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if p["allowed_updates"] != "" {
		s.allowed = allowed
	}
	if p.bool("drop_pending_updates") {
		s.dropPendingLocked()
	}
	if s.poll != nil {
		s.poll.why = "Conflict: terminated by setWebhook request"
		close(s.poll.kick)
		s.poll = nil
	}
	s.hook.url, s.hook.secret, s.hook.active = raw, secret, true
	s.hook.maxConn = int(min(max(maxConn, 1), 100))
	s.hook.epoch++
	s.notifyLocked()
	return true, nil
}

// checkWebhookURL refuses what Telegram refuses: anything but HTTPS on the
// ports 443, 80, 88 and 8443. A loopback URL may be plain HTTP on any port,
// since that is where the bot under test listens.
func checkWebhookURL(raw string) *apiError {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return badRequest("bad webhook: Failed to resolve host: Name or service not known")
	}
	if loopback.Host(u.Hostname()) && (u.Scheme == "http" || u.Scheme == "https") {
		return nil
	}
	if u.Scheme != "https" {
		return badRequest("bad webhook: An HTTPS URL must be provided for webhook")
	}
	switch u.Port() {
	case "", "443", "80", "88", "8443":
		return nil
	}
	return badRequest("bad webhook: Webhook can be set up only on ports 80, 88, 443 or 8443")
}

// checkSecretToken applies Telegram's rule: 1-256 characters of A-Z, a-z,
// 0-9, _ and -, or none at all.
func checkSecretToken(s string) *apiError {
	if len(s) > maxSecretToken {
		return badRequest("secret token is too long")
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return badRequest("secret token contains unallowed characters")
		}
	}
	return nil
}

func (s *Server) deleteWebhook(_ context.Context, p params) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hook.url, s.hook.secret, s.hook.active = "", "", false
	s.hook.epoch++
	if p.bool("drop_pending_updates") {
		s.dropPendingLocked()
	}
	s.notifyLocked()
	return true, nil
}

// dropPendingLocked forgets every queued update.
func (s *Server) dropPendingLocked() {
	if n := len(s.queue); n > 0 {
		s.confirmed = max(s.confirmed, s.queue[n-1].id+1)
	}
	s.queue = nil
}

func (s *Server) getWebhookInfo(context.Context, params) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.filterLocked()
	info := map[string]any{
		"url":                    s.hook.url,
		"has_custom_certificate": false,
		"pending_update_count":   len(s.queue),
	}
	if s.hook.url != "" && s.hook.active {
		info["max_connections"] = s.hook.maxConn
		if len(s.allowed) > 0 {
			info["allowed_updates"] = slices.Clone(s.allowed)
		}
	}
	if s.hook.lastErrMsg != "" {
		info["last_error_date"] = s.hook.lastErrAt
		info["last_error_message"] = s.hook.lastErrMsg
	}
	return info, nil
}

// deliverLoop delivers queued updates to an active webhook, one at a time
// and in order, as Telegram does with max_connections 1 (the fake uses one
// connection whatever max_connections says). It runs from New to Close.
func (s *Server) deliverLoop(ctx context.Context) {
	client := &http.Client{
		Timeout:       deliveryTimeout,
		Transport:     loopbackTransport(),
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	defer client.CloseIdleConnections()
	// attempts counts the failed deliveries of the update at the head of
	// the queue to the current webhook.
	attempts, head, epoch := 0, 0, 0
	for ctx.Err() == nil {
		s.mu.Lock()
		s.filterLocked()
		hook, changed := s.hook, s.changes.C()
		var next *queued
		if hook.active && len(s.queue) > 0 {
			q := s.queue[0]
			next = &q
		}
		s.mu.Unlock()
		if next == nil {
			select {
			case <-changed:
			case <-ctx.Done():
			}
			continue
		}
		if next.id != head || hook.epoch != epoch {
			head, epoch, attempts = next.id, hook.epoch, 0
		}
		d := s.deliver(ctx, client, hook, *next)
		if ctx.Err() != nil {
			return
		}
		if s.settle(hook.epoch, *next, d, &attempts) {
			continue
		}
		r := hook.retry
		wait := r.Min << min(attempts-1, 20)
		wait = min(wait, r.Max)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
}

// deliver POSTs one update and reports the outcome.
func (s *Server) deliver(ctx context.Context, client *http.Client, hook webhookState, q queued) WebhookDelivery {
	d := WebhookDelivery{UpdateID: q.id, Time: time.Now()}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, hook.url, bytes.NewReader(q.raw))
	if err != nil {
		d.Err = "Failed to resolve host: " + err.Error()
		return d
	}
	req.Header.Set("Content-Type", "application/json")
	if hook.secret != "" {
		req.Header.Set(SecretHeader, hook.secret)
	}
	resp, err := client.Do(req)
	if err != nil {
		d.Err = connectionError(err)
		return d
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	d.Status = resp.StatusCode
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		d.Err = fmt.Sprintf("Wrong response from the webhook: %d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
	}
	return d
}

// settle records a delivery and reports whether the update is done with
// (acknowledged, given up on, or the webhook changed meanwhile).
func (s *Server) settle(epoch int, q queued, d WebhookDelivery, attempts *int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.notifyLocked()
	if d.Err == "" && s.hook.loseAcks > 0 {
		s.hook.loseAcks--
		d.Lost = true
	}
	s.hook.deliveries = append(s.hook.deliveries, d)
	if s.hook.epoch != epoch {
		return true // a new webhook starts its own attempts
	}
	if d.Err == "" && !d.Lost {
		s.removeLocked(q.id)
		return true
	}
	if d.Err != "" {
		s.hook.lastErrAt, s.hook.lastErrMsg = d.Time.Unix(), d.Err
	}
	*attempts++
	if g := s.hook.retry.GiveUpAfter; g > 0 && *attempts >= g {
		s.removeLocked(q.id)
		return true
	}
	return false
}

// removeLocked drops a delivered (or abandoned) update from the queue.
func (s *Server) removeLocked(id int) {
	if i := slices.IndexFunc(s.queue, func(q queued) bool { return q.id == id }); i >= 0 {
		s.queue = slices.Delete(s.queue, i, i+1)
	}
	s.confirmed = max(s.confirmed, id+1)
}

// connectionError words a transport error the way getWebhookInfo does.
func connectionError(err error) string {
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "Connection refused"
	case errors.Is(err, errNotLoopback):
		return "Connection refused: " + errNotLoopback.Error()
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, syscall.ETIMEDOUT):
		return "Connection timed out"
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "Connection timed out"
	}
	return "Connection error: " + err.Error()
}

// loopbackTransport dials loopback addresses only, so that no test ever
// sends an update across the network, and ignores proxy settings.
func loopbackTransport() *http.Transport {
	dialer := &net.Dialer{
		Timeout: 5 * time.Second,
		Control: func(_, address string, _ syscall.RawConn) error {
			host, _, err := net.SplitHostPort(address)
			if err != nil {
				return err
			}
			if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
				return errNotLoopback
			}
			return nil
		},
	}
	return &http.Transport{
		Proxy:               nil,
		DialContext:         dialer.DialContext,
		MaxIdleConnsPerHost: 1,
		IdleConnTimeout:     30 * time.Second,
	}
}

package telegram

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"github.com/latchd/latch/gateways/internal/loopback"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/latchd/latch/gateways/adapter"
	"github.com/latchd/latch/logkey"
)

// Webhook mode: Telegram POSTs each update to [telegram] webhook_url, which
// a reverse proxy terminating TLS forwards to a plain HTTP listener on
// webhook_listen. The durability story is the same as polling's: an update
// is acknowledged (2xx) only once Ingest has stored it, and Telegram
// repeats a delivery until it is acknowledged, so nothing is lost; a
// repeat of an update already stored is acknowledged and dropped (see
// seen), so nothing is stored twice. latch leaves the webhook set when it
// stops, so Telegram keeps the updates that arrive meanwhile.

const (
	// DefaultWebhookListen is where the webhook listener binds: loopback,
	// behind a reverse proxy that terminates TLS.
	DefaultWebhookListen = "127.0.0.1:8443"
	// DefaultWebhookCheck is how often getWebhookInfo is asked whether the
	// webhook is still ours and whether Telegram can reach it.
	DefaultWebhookCheck = time.Minute
	// SecretHeader carries the webhook's secret_token on every delivery.
	SecretHeader = "X-Telegram-Bot-Api-Secret-Token"

	// maxWebhookBody bounds one delivery; an update is a few kilobytes.
	maxWebhookBody = 1 << 20
	// maxSecretLen is Telegram's limit on secret_token.
	maxSecretLen = 256
	// webhookShutdown bounds how long a stopping Run waits for a delivery
	// being stored.
	webhookShutdown = 5 * time.Second
)

// notFound is the answer to every request that is not a delivery from
// Telegram, whatever was wrong with it, so a prober learns nothing.
var notFound = []byte("404 page not found\n")

// rawNotFound is the whole response reject makes, as net/http writes it.
// uniformConn sends it instead of the answers net/http makes itself to a
// request it cannot parse (400, 431, 501, 505...), which never reach the
// handler.
var rawNotFound = []byte("HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 19\r\n" +
	"Content-Type: text/plain; charset=utf-8\r\nX-Content-Type-Options: nosniff\r\n\r\n404 page not found\n")

// uniformListener hands out uniformConns.
type uniformListener struct{ net.Listener }

func (l uniformListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &uniformConn{Conn: c}, nil
}

// uniformConn replaces a response net/http writes on its own — one that
// begins with a status the handler never answers (it answers 200, 404 and
// 503 only) — by rawNotFound. net/http writes such a response in one Write
// straight to the connection and closes it afterwards; the handler's
// responses pass untouched.
type uniformConn struct{ net.Conn }

func (c *uniformConn) Write(b []byte) (int, error) {
	// The handler's bodies are fixed and never look like a status line.
	if bytes.HasPrefix(b, []byte("HTTP/1.")) && len(b) >= 12 {
		switch string(b[9:12]) {
		case "200", "404", "503":
		default:
			if _, err := c.Conn.Write(rawNotFound); err != nil {
				return 0, err
			}
			return len(b), nil
		}
	}
	return c.Conn.Write(b)
}

// webhookMode reports whether updates come by webhook.
func (g *Gateway) webhookMode() bool { return g.cfg.WebhookURL != "" }

// webhook is the listener Telegram delivers to. Start binds it and sets the
// webhook; Run serves it.
type webhook struct {
	g      *Gateway
	path   string
	digest [sha256.Size]byte // of the secret: compared in constant time, whatever the length
	ln     net.Listener
	sink   adapter.Sink // set by Run before serving

	// mu makes "already stored?", Ingest and the update of seen one step,
	// so two deliveries of the same update cannot both be stored.
	mu    sync.Mutex
	seen  seen
	stale bool // seen must be read from the store first
}

// ValidWebhookSecret reports whether s is a secret_token Telegram accepts:
// 1-256 characters of A-Z, a-z, 0-9, _ and -.
func ValidWebhookSecret(s string) bool {
	if s == "" || len(s) > maxSecretLen {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// webhookPath checks the webhook URL and returns the path Telegram will
// POST to. HTTPS is required except on loopback (tests, or a proxy on the
// same machine that Telegram cannot reach anyway).
func webhookPath(raw string) (string, error) {
	u, err := url.Parse(raw)
	switch {
	case err != nil || u.Host == "":
		return "", errors.New("telegram: webhook_url is not an absolute URL")
	case u.Scheme != "https" && !(u.Scheme == "http" && loopback.Host(u.Hostname())):
		return "", errors.New("telegram: webhook_url must be an https:// URL")
	case u.User != nil || u.RawQuery != "" || u.Fragment != "":
		return "", errors.New("telegram: webhook_url must not have user info, a query or a fragment")
	}
	if u.Path == "" {
		return "/", nil
	}
	return u.Path, nil
}

// shownURL is a webhook URL fit for a log line: its path may be meant to
// be hard to guess, so only the scheme and host are shown.
func shownURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(invalid URL)"
	}
	s := u.Scheme + "://" + u.Host
	if u.Path != "" && u.Path != "/" {
		s += "/…"
	}
	return s
}

// startWebhook binds the listener (once) and sets the webhook. The listener
// comes first so that Telegram's first delivery finds it.
func (g *Gateway) startWebhook(ctx context.Context) error {
	path, err := webhookPath(g.cfg.WebhookURL)
	if err != nil {
		return err
	}
	if !ValidWebhookSecret(g.cfg.WebhookSecret) {
		return errors.New("telegram: webhook_secret must be 1-256 characters of A-Z, a-z, 0-9, _ and -")
	}
	g.mu.Lock()
	h := g.hook
	g.mu.Unlock()
	if h == nil {
		ln, err := net.Listen("tcp", g.cfg.WebhookListen)
		if err != nil {
			return fmt.Errorf("telegram: webhook listener on %s: %w", g.cfg.WebhookListen, err)
		}
		h = &webhook{g: g, path: path, digest: sha256.Sum256([]byte(g.cfg.WebhookSecret)), ln: ln, stale: true}
		g.mu.Lock()
		g.hook = h
		g.mu.Unlock()
	}
	if err := g.setWebhook(ctx); err != nil {
		return err
	}
	g.log.Info("webhook set; Telegram delivers updates to it",
		"webhook", shownURL(g.cfg.WebhookURL), "listen", h.ln.Addr().String())
	return nil
}

// setWebhook registers the webhook. The library's WebhookConfig has no
// secret_token, hence the raw request. max_connections 1 makes Telegram
// deliver one update at a time; pending updates are kept.
func (g *Gateway) setWebhook(ctx context.Context) error {
	b, err := g.bot(ctx)
	if err != nil {
		return err
	}
	params := tgbotapi.Params{
		"url":                  g.cfg.WebhookURL,
		"secret_token":         g.cfg.WebhookSecret,
		"max_connections":      "1",
		"drop_pending_updates": "false",
	}
	if err := params.AddInterface("allowed_updates", allowedUpdates()); err != nil {
		return err
	}
	_, err = b.MakeRequest("setWebhook", params)
	if err == nil {
		return nil
	}
	err = g.scrub(err)
	var apiErr *tgbotapi.Error
	if errors.As(err, &apiErr) {
		switch apiErr.Code {
		case http.StatusUnauthorized:
			return ErrUnauthorized
		case http.StatusBadRequest:
			return fmt.Errorf("telegram: the Bot API refused the webhook; check [telegram] webhook_url and webhook_secret: %w", err)
		}
	}
	return fmt.Errorf("telegram: setWebhook: %w", err)
}

// runWebhook serves deliveries until ctx ends, checking now and then that
// the webhook is still set and reachable. It leaves the webhook set: while
// latch is down Telegram keeps the updates and delivers them afterwards.
func (g *Gateway) runWebhook(ctx context.Context, sink adapter.Sink) error {
	g.mu.Lock()
	h := g.hook
	g.hook = nil // this Run owns the listener now
	g.mu.Unlock()
	if h == nil {
		return errNotStarted
	}
	h.sink = sink
	srv := &http.Server{
		Handler: h,
		// "OPTIONS *" goes to the handler, which rejects it like any
		// other request that is not a delivery.
		DisableGeneralOptionsHandler: true,
		ReadHeaderTimeout:            10 * time.Second,
		ReadTimeout:                  30 * time.Second,
		WriteTimeout:                 30 * time.Second,
		IdleTimeout:                  2 * time.Minute,
		MaxHeaderBytes:               8 << 10,
		ErrorLog:                     slog.NewLogLogger(g.log.Handler(), slog.LevelDebug),
	}
	var serveErr error
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		serveErr = srv.Serve(uniformListener{h.ln})
	}()

	err := g.watchWebhook(ctx, stopped)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), webhookShutdown)
	defer cancel()
	if srv.Shutdown(sctx) != nil {
		_ = srv.Close()
	}
	<-stopped
	if err == nil && !errors.Is(serveErr, http.ErrServerClosed) {
		err = fmt.Errorf("telegram: webhook listener: %w", serveErr)
	}
	return err
}

// watchWebhook asks getWebhookInfo every WebhookCheck until ctx ends or the
// server stops. It returns ErrUnauthorized if the token stops working.
func (g *Gateway) watchWebhook(ctx context.Context, stopped <-chan struct{}) error {
	t := time.NewTicker(g.cfg.WebhookCheck)
	defer t.Stop()
	// Delivery errors from before this run (latch was down) are no news.
	lastErr := time.Now().Unix()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-stopped:
			return nil
		case <-t.C:
			if err := g.checkWebhook(ctx, &lastErr); errors.Is(err, ErrUnauthorized) {
				return err
			}
		}
	}
}

// checkWebhook sets the webhook again if someone changed or removed it,
// and reports delivery errors Telegram saw since the last one reported.
func (g *Gateway) checkWebhook(ctx context.Context, lastErr *int64) error {
	b, err := g.bot(ctx)
	if err != nil {
		return err
	}
	info, err := b.GetWebhookInfo()
	if err != nil {
		err = g.scrub(err)
		g.setStatus(err)
		var apiErr *tgbotapi.Error
		if errors.As(err, &apiErr) && apiErr.Code == http.StatusUnauthorized {
			g.log.Error("the Bot API rejected the token; webhook stopped", logkey.Err, err)
			return ErrUnauthorized
		}
		g.log.Debug("getWebhookInfo failed", logkey.Err, err)
		return nil
	}
	if info.URL != g.cfg.WebhookURL {
		g.log.Warn("the webhook was changed or removed by something else; setting it again",
			"found", shownURL(info.URL))
		if err := g.setWebhook(ctx); err != nil {
			g.setStatus(err)
			g.log.Warn("setting the webhook again failed", logkey.Err, err)
			return err
		}
	}
	if d := int64(info.LastErrorDate); d > *lastErr && info.LastErrorMessage != "" {
		*lastErr = d
		err := fmt.Errorf("telegram: Telegram could not deliver to the webhook: %s", info.LastErrorMessage)
		g.setStatus(err)
		g.log.Warn("Telegram reports a failed webhook delivery; it will repeat it",
			"telegram_error", info.LastErrorMessage, "pending", info.PendingUpdateCount)
		return nil
	}
	g.setStatus(nil)
	return nil
}

// ServeHTTP takes one delivery. Only a POST of JSON to the webhook's path
// with the right secret is looked at; anything else gets notFound.
func (h *webhook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !h.admit(r) {
		reject(w)
		h.g.log.Debug("webhook: rejected a request", "method", r.Method)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxWebhookBody))
	if err != nil {
		reject(w)
		h.g.log.Debug("webhook: rejected an oversized or broken body", logkey.Err, err)
		return
	}
	status := h.handle(r.Context(), body)
	w.Header()["Date"] = nil
	w.Header().Set("Content-Length", "0")
	w.WriteHeader(status)
}

// admit checks a request before its body is read. Every check is made,
// whichever fails, and the secret is compared as SHA-256 digests in
// constant time, so neither its content nor its length shows in the time
// taken.
func (h *webhook) admit(r *http.Request) bool {
	given := r.Header.Values(SecretHeader)
	var sum [sha256.Size]byte
	if len(given) == 1 {
		sum = sha256.Sum256([]byte(given[0]))
	}
	secretOK := subtle.ConstantTimeCompare(sum[:], h.digest[:]) == 1 && len(given) == 1
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	typeOK := err == nil && mt == "application/json"
	placeOK := r.Method == http.MethodPost && r.URL.Path == h.path && r.URL.RawQuery == ""
	return secretOK && typeOK && placeOK
}

// reject writes notFound with fixed headers (no Date), and closes the
// connection, so every rejection is the same bytes.
func reject(w http.ResponseWriter) {
	hd := w.Header()
	hd["Content-Type"] = []string{"text/plain; charset=utf-8"}
	hd["Content-Length"] = []string{strconv.Itoa(len(notFound))}
	hd["X-Content-Type-Options"] = []string{"nosniff"}
	hd["Connection"] = []string{"close"}
	hd["Date"] = nil
	w.WriteHeader(http.StatusNotFound)
	_, _ = w.Write(notFound)
}

// handle stores one update and returns the status to answer: 200 once it is
// stored (or was already), 503 when the store failed, so that Telegram
// repeats the delivery.
func (h *webhook) handle(ctx context.Context, body []byte) int {
	u := h.g.decode(body)
	if !u.hasID || u.id <= 0 || u.id > maxUpdateID {
		// Repeating it would not make it an update.
		h.g.log.Warn("webhook: acknowledged a delivery that is not an update")
		return http.StatusOK
	}
	log := h.g.log.With("update_id", u.id)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stale {
		c, err := h.sink.Cursor(ctx, gatewayName)
		if err != nil {
			log.Warn("reading the update cursor failed; Telegram will repeat the delivery", logkey.Err, h.g.scrub(err))
			return http.StatusServiceUnavailable
		}
		c, topics := splitCursor(c)
		h.g.restoreTopics(topics)
		s, ok := parseSeen(c)
		if !ok {
			log.Warn("ignoring an invalid stored update cursor", "cursor", c)
		}
		h.seen, h.stale = s, false
	}
	if h.seen.has(u.id) {
		log.Info("webhook: a repeated delivery of an update already stored; acknowledged and dropped")
		return http.StatusOK
	}
	next := h.seen.with(u.id)
	var msgs []adapter.Message
	if u.ok {
		msgs = []adapter.Message{u.msg}
	}
	if err := h.g.ingest(ctx, h.sink, next.encode(), msgs); err != nil {
		// What the store holds now is unknown: read it again next time.
		h.stale = true
		log.Warn("storing an update failed; Telegram will repeat the delivery", logkey.Err, h.g.scrub(err))
		return http.StatusServiceUnavailable
	}
	h.seen = next
	h.g.setStatus(nil)
	return http.StatusOK
}

package discord

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/latchd/latch/gateways/adapter"
	"github.com/latchd/latch/turn"
)

// cdnHosts serve Discord's attachments.
var cdnHosts = []string{"cdn.discordapp.com", "media.discordapp.net"}

// SendFile uploads a file to a channel as an attachment, up to
// Config.MaxUpload (10 MB by default: Discord's limit without server
// boosts). replyTo ("" for none) threads it. An upload that fails
// transiently (Discord's 5xx, or no answer) is made again from the start,
// up to answerTries times, as a message is (persist).
func (g *Gateway) SendFile(ctx context.Context, chatID string, f turn.File, replyTo string) error {
	s, err := g.started()
	if err != nil {
		return err
	}
	if _, ok := snowflake(chatID); !ok {
		return fmt.Errorf("discord: invalid channel id %q", chatID)
	}
	name := filepath.Base(f.Name)
	if name == "." || name == string(filepath.Separator) || name == "" {
		name = "file"
	}
	size := int64(len(f.Data))
	switch {
	case size == 0:
		return fmt.Errorf("discord: send %s: the file is empty, and Discord takes no empty files", name)
	case size > g.cfg.MaxUpload:
		return fmt.Errorf("discord: send %s: %w: %s is over the %s upload limit (Discord's limit without server boosts)",
			name, ErrFileTooLarge, megabytes(size), megabytes(g.cfg.MaxUpload))
	}
	ctype := mime.TypeByExtension(strings.ToLower(filepath.Ext(name)))
	if ctype == "" {
		ctype = "application/octet-stream"
	}
	err = g.persist(ctx, g.log, func() error {
		return g.call(ctx, uploadTimeout, nil, func(opts ...discordgo.RequestOption) error {
			m := newMessage("")
			m.Reference = reference(chatID, replyTo)
			// A fresh reader per attempt: a retry must upload from the start.
			m.Files = []*discordgo.File{{Name: name, ContentType: ctype, Reader: bytes.NewReader(f.Data)}}
			_, err := s.ChannelMessageSendComplex(chatID, m, opts...)
			return err
		})
	})
	switch {
	case isAPI(err, http.StatusRequestEntityTooLarge, 0):
		return fmt.Errorf("discord: send %s: %w: Discord refused %s (%v)", name, ErrFileTooLarge, megabytes(size), err)
	case err != nil:
		return fmt.Errorf("discord: send %s: %w", name, err)
	}
	g.markAnswered(chatID)
	return nil
}

func megabytes(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/(1<<20)) }

// Download fetches an attachment from its CDN URL (the attachment's id),
// without the bot token, into w. It refuses a file announced larger than
// max and stops with ErrFileTooLarge as soon as more than max bytes
// arrive; w may then hold a partial file, which the caller discards. Only
// Discord's CDN (or the configured API host) is fetched from.
//
// Discord signs attachment URLs for about a day (ex, is, hm in the
// query), and a message may wait in the inbox longer than that. So a URL
// whose ex has passed (or is about to) is refreshed through the API
// before the download, and one the CDN refuses all the same (404, 403)
// is refreshed once and fetched once more.
func (g *Gateway) Download(ctx context.Context, a adapter.Attachment, w io.Writer, max int64) error {
	if a.Size > max {
		return tooLarge(a.Size, max)
	}
	u, err := url.Parse(a.ID)
	if err != nil || !g.downloadAllowed(u) {
		return errors.New("discord: download: not a Discord attachment URL")
	}
	refreshed := false
	if linkExpired(u, time.Now()) {
		if u, err = g.refreshLink(ctx, u); err != nil {
			return err
		}
		refreshed = true
	}
	err = g.fetch(ctx, u, w, max)
	if !refreshed && isGone(err) {
		// The CDN refuses (nothing was written to w) a link whose ex
		// looked valid: our clock is behind, or the link was revoked.
		if u, err = g.refreshLink(ctx, u); err != nil {
			return err
		}
		err = g.fetch(ctx, u, w, max)
	}
	return err
}

func tooLarge(size, max int64) error {
	return fmt.Errorf("discord: download: %w: %s, the limit is %s", ErrFileTooLarge, megabytes(size), megabytes(max))
}

// fetch downloads the file at u into w, at most max bytes. A refusal of
// the CDN is a *cdnError, and leaves w untouched.
func (g *Gateway) fetch(ctx context.Context, u *url.URL, w io.Writer, max int64) error {
	ctx, cancel := context.WithTimeout(ctx, uploadTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return g.downloadError(err)
	}
	resp, err := g.download.Do(req)
	if err != nil {
		return g.downloadError(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("discord: download: %w", &cdnError{status: resp.Status, code: resp.StatusCode})
	}
	if resp.ContentLength > max {
		return tooLarge(resp.ContentLength, max)
	}
	n, err := io.Copy(w, io.LimitReader(resp.Body, max))
	if err != nil {
		return g.downloadError(err)
	}
	if n == max {
		// Exactly max arrived: anything more means the file is larger.
		var one [1]byte
		if k, _ := io.ReadFull(resp.Body, one[:]); k > 0 {
			return fmt.Errorf("discord: download: %w: more than %s arrived", ErrFileTooLarge, megabytes(max))
		}
	}
	return nil
}

// cdnError is an answer of the CDN other than 200.
type cdnError struct {
	status string
	code   int
}

func (e *cdnError) Error() string { return "the CDN answered HTTP " + e.status }

// isGone reports whether the CDN refused the link as Discord's CDN does
// an expired one (404 "This content is no longer available."), or with
// 403.
func isGone(err error) bool {
	var e *cdnError
	return errors.As(err, &e) && (e.code == http.StatusNotFound || e.code == http.StatusForbidden)
}

// downloadError scrubs err of the token and cuts the query off the URL a
// *url.Error names: a signed link fetches the file, without the token,
// until it expires, and the error reaches the chat and the model.
func (g *Gateway) downloadError(err error) error {
	err = g.scrub(err)
	if ue, ok := err.(*url.Error); ok {
		if base, _, cut := strings.Cut(ue.URL, "?"); cut {
			ue.URL = base + "?" + redacted
		}
	}
	return fmt.Errorf("discord: download: %w", err)
}

// downloadAllowed accepts Discord's CDN over HTTPS, and the configured
// API's own host (a fake, or a proxy that serves attachments too).
func (g *Gateway) downloadAllowed(u *url.URL) bool {
	if u.User != nil {
		return false
	}
	if api, err := url.Parse(g.cfg.APIURL); err == nil && u.Scheme == api.Scheme && u.Host == api.Host {
		return true
	}
	if u.Scheme != "https" {
		return false
	}
	for _, h := range cdnHosts {
		if strings.EqualFold(u.Hostname(), h) {
			return true
		}
	}
	return false
}

func (g *Gateway) checkDownloadRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= 3 || !g.downloadAllowed(req.URL) {
		return errors.New("redirect refused: not a Discord attachment URL")
	}
	return nil
}

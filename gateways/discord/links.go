package discord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/bwmarrin/discordgo"
)

// refreshMargin is how close to its expiry a signed attachment link is
// refreshed before it is fetched: the download must start (and, on a slow
// link, go on) while the link is valid.
const refreshMargin = time.Minute

// linkExpired reports whether a signed attachment link's ex (its expiry,
// a hex Unix time) has passed at now or will within refreshMargin. A link
// without a readable ex is left to the CDN to judge.
func linkExpired(u *url.URL, now time.Time) bool {
	ex, err := strconv.ParseInt(u.Query().Get("ex"), 16, 64)
	return err == nil && !now.Add(refreshMargin).Before(time.Unix(ex, 0))
}

// refreshRequest and refreshResponse are the body and the answer of
// POST /attachments/refresh-urls.
type refreshRequest struct {
	AttachmentURLs []string `json:"attachment_urls"`
}

type refreshResponse struct {
	RefreshedURLs []struct {
		Original  string `json:"original"`
		Refreshed string `json:"refreshed"`
	} `json:"refreshed_urls"`
}

// refreshLink asks Discord, with the bot token, for a freshly signed link
// to the attachment at u. The new link must be one Download would fetch
// from anyway: the refresh cannot send latch to another host. Errors name
// neither link, whose query is the signature.
func (g *Gateway) refreshLink(ctx context.Context, u *url.URL) (*url.URL, error) {
	s, err := g.started()
	if err != nil {
		return nil, fmt.Errorf("discord: download: refresh the attachment's link: %w", err)
	}
	endpoint := discordgo.EndpointAPI + "attachments/refresh-urls"
	var raw []byte
	err = g.call(ctx, requestTimeout, nil, func(opts ...discordgo.RequestOption) (err error) {
		raw, err = s.RequestWithBucketID(http.MethodPost, endpoint, refreshRequest{AttachmentURLs: []string{u.String()}}, endpoint, opts...)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("discord: download: refresh the attachment's link: %w", err)
	}
	var resp refreshResponse
	if err := json.Unmarshal(raw, &resp); err != nil {
		return nil, fmt.Errorf("discord: download: refresh the attachment's link: unreadable answer: %w", err)
	}
	for _, r := range resp.RefreshedURLs {
		orig, err := url.Parse(r.Original)
		if err != nil || orig.Host != u.Host || orig.Path != u.Path {
			continue
		}
		fresh, err := url.Parse(r.Refreshed)
		if err != nil || !g.downloadAllowed(fresh) {
			return nil, errors.New("discord: download: Discord refreshed the attachment's link to one that is not a Discord attachment URL")
		}
		return fresh, nil
	}
	return nil, errors.New("discord: download: the attachment's link is no longer valid and Discord gave no new one (was the message deleted?)")
}

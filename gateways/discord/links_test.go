package discord

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latchd/latch/gateways"
	"github.com/latchd/latch/gateways/discord/discordtest"
)

// postFile has alice send a file and returns it as the adapter stores it.
func postFile(srv *discordtest.Server, data []byte) gateways.Attachment {
	m := srv.SendDM(alice, "", discordtest.File{Name: "notes.txt", Data: data})
	return gateways.Attachment{ID: m.Attachments[0].URL, Name: "notes.txt", Size: int64(len(data)), Kind: "document"}
}

// checkNoSecrets fails if err shows the token or a link's signature.
func checkNoSecrets(t *testing.T, err error, links ...string) {
	t.Helper()
	for _, l := range links {
		u, _ := url.Parse(l)
		if hm := u.Query().Get("hm"); hm != "" && strings.Contains(err.Error(), hm) {
			t.Errorf("error %q shows a link's signature", err)
		}
	}
	if strings.Contains(err.Error(), testToken) {
		t.Errorf("error %q shows the token", err)
	}
}

// TestDownloadRefreshesExpiredLink: a file whose link expired while the
// message waited is fetched through a link Discord refreshes first, with
// the bot token, and the expired link is not tried at all.
func TestDownloadRefreshesExpiredLink(t *testing.T) {
	srv := newFake(t)
	g, _ := started(t, srv)
	srv.SetURLTTL(-time.Hour)
	data := []byte("the owner's notes")
	a := postFile(srv, data)
	srv.SetURLTTL(discordtest.DefaultURLTTL)

	var buf bytes.Buffer
	if err := g.Download(testContext(t), a, &buf, 1<<20); err != nil || !bytes.Equal(buf.Bytes(), data) {
		t.Fatalf("Download = %v, %q; want the file", err, buf.Bytes())
	}
	refreshes := srv.Calls(discordtest.RouteRefreshURLs)
	if len(refreshes) != 1 || !refreshes[0].Authorized || !strings.Contains(string(refreshes[0].Body), "attachment_urls") {
		t.Errorf("refresh requests = %+v, want one with the bot token", refreshes)
	}
	if n := srv.Count(discordtest.RouteAttachment); n != 1 {
		t.Errorf("%d CDN requests, want 1 (the expired link is not worth a try)", n)
	}
}

// TestDownloadRefreshesRefusedLink: a link whose ex still looks valid but
// which the CDN refuses (its clock is ahead of ours) is refreshed once and
// fetched once more.
func TestDownloadRefreshesRefusedLink(t *testing.T) {
	srv := newFake(t)
	g, _ := started(t, srv)
	data := []byte("the owner's photo")
	a := postFile(srv, data)
	srv.SetCDNClock(func() time.Time { return time.Now().Add(48 * time.Hour) })

	var buf bytes.Buffer
	if err := g.Download(testContext(t), a, &buf, 1<<20); err != nil || !bytes.Equal(buf.Bytes(), data) {
		t.Fatalf("Download = %v, %q; want the file", err, buf.Bytes())
	}
	if n, m := srv.Count(discordtest.RouteRefreshURLs), srv.Count(discordtest.RouteAttachment); n != 1 || m != 2 {
		t.Errorf("%d refreshes and %d CDN requests, want 1 and 2", n, m)
	}
}

// TestDownloadRefreshGivesUp: when the refresh gives no link, or the
// refreshed link is refused too, Download fails at once, saying so,
// without a second refresh and without the link's signature.
func TestDownloadRefreshGivesUp(t *testing.T) {
	srv := newFake(t)
	g, _ := started(t, srv)
	unknown := func(ex time.Time) gateways.Attachment {
		q := "ex=" + hexTime(ex) + "&is=" + hexTime(ex.Add(-24*time.Hour)) + "&hm=0123456789abcdef0123456789abcdef&"
		return gateways.Attachment{ID: srv.URL() + "/attachments/1/2/gone.txt?" + q}
	}
	srv.SetURLTTL(-time.Hour)
	expiredForGood := postFile(srv, []byte("x")) // every refresh is expired too
	cases := []struct {
		name     string
		a        gateways.Attachment
		want     string
		wantCDN  int
		wantGone bool
	}{
		{"expired, Discord gives none", unknown(time.Now().Add(-time.Hour)), "gave no new one", 0, false},
		{"refused, Discord gives none", unknown(time.Now().Add(time.Hour)), "gave no new one", 1, false},
		{"the refreshed link refused too", expiredForGood, "404", 1, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			refreshes, cdn := srv.Count(discordtest.RouteRefreshURLs), srv.Count(discordtest.RouteAttachment)
			var buf bytes.Buffer
			err := g.Download(testContext(t), c.a, &buf, 1<<20)
			if err == nil || !strings.Contains(err.Error(), c.want) || isGone(err) != c.wantGone {
				t.Fatalf("Download = %v, want an error saying %q", err, c.want)
			}
			checkNoSecrets(t, err, c.a.ID)
			if n := srv.Count(discordtest.RouteRefreshURLs) - refreshes; n != 1 {
				t.Errorf("%d refreshes, want 1", n)
			}
			if n := srv.Count(discordtest.RouteAttachment) - cdn; n != c.wantCDN {
				t.Errorf("%d CDN requests, want %d", n, c.wantCDN)
			}
		})
	}
}

func hexTime(t time.Time) string { return strconv.FormatInt(t.Unix(), 16) }

// TestDownloadRefreshedLinkElsewhere: a refreshed link to a host Download
// would not fetch from is refused, unfetched.
func TestDownloadRefreshedLinkElsewhere(t *testing.T) {
	var hits atomic.Int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		_, _ = w.Write([]byte("not the owner's file"))
	}))
	t.Cleanup(elsewhere.Close)
	srv := newFake(t)
	g, _ := started(t, srv)
	srv.SetURLTTL(-time.Hour)
	a := postFile(srv, []byte("x"))
	// (A loopback server stands in for the other host: a test must not
	// reach the internet, not even when the check it tests is broken.)
	to := elsewhere.URL + "/attachments/1/2/notes.txt"
	body := `{"refreshed_urls":[{"original":"` + a.ID + `","refreshed":"` + to + `"}]}`
	srv.Inject(discordtest.RouteRefreshURLs, discordtest.Fault{Body: body})
	var buf bytes.Buffer
	err := g.Download(testContext(t), a, &buf, 1<<20)
	if err == nil || !strings.Contains(err.Error(), "not a Discord attachment URL") || buf.Len() != 0 {
		t.Errorf("Download refreshed to %s = %v, %q; want it refused", to, err, buf.Bytes())
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the other host was asked %d times", n)
	}
	if n := srv.Count(discordtest.RouteAttachment); n != 0 {
		t.Errorf("%d CDN requests, want none", n)
	}
}

// TestDownloadRefreshRateLimited: the refresh goes through the adapter's
// REST path, which waits out a 429.
func TestDownloadRefreshRateLimited(t *testing.T) {
	srv := newFake(t)
	g, _ := started(t, srv)
	srv.SetURLTTL(-time.Hour)
	a := postFile(srv, []byte("data"))
	srv.SetURLTTL(discordtest.DefaultURLTTL)
	srv.Inject(discordtest.RouteRefreshURLs, discordtest.Fault{Status: http.StatusTooManyRequests, RetryAfter: 0.01})
	var buf bytes.Buffer
	if err := g.Download(testContext(t), a, &buf, 1<<20); err != nil || buf.String() != "data" {
		t.Fatalf("Download = %v, %q; want the file", err, buf.Bytes())
	}
	if n := srv.Count(discordtest.RouteRefreshURLs); n != 2 {
		t.Errorf("%d refresh requests, want 2 (one rate-limited)", n)
	}
}

// TestDownloadErrorHidesSignature: a transport error names the link
// without its query, which would fetch the file without the token.
func TestDownloadErrorHidesSignature(t *testing.T) {
	srv := newFake(t)
	g, _ := started(t, srv)
	a := postFile(srv, []byte("data"))
	// Two: net/http makes a GET again once when a reused connection drops.
	srv.Inject(discordtest.RouteAttachment, discordtest.Fault{Hangup: true, Times: 2})
	var buf bytes.Buffer
	err := g.Download(testContext(t), a, &buf, 1<<20)
	var ue *url.Error
	if !errors.As(err, &ue) {
		t.Fatalf("Download over a dropped connection = %v, want a *url.Error", err)
	}
	checkNoSecrets(t, err, a.ID)
}

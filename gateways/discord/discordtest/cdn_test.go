package discordtest

import (
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

// get fetches an attachment URL and returns the status and body.
func get(t *testing.T, link string) (int, string) {
	t.Helper()
	resp, err := http.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestSignedAttachmentURLs: attachment URLs carry Discord's ex, is and hm;
// the CDN serves a URL only while it is valid by its clock and signed
// as it was given out, else 404 "This content is no longer available.".
func TestSignedAttachmentURLs(t *testing.T) {
	s := newServer(t)
	link := s.SendDM(alice, "", File{Name: "a b.txt", Data: []byte("data")}).Attachments[0].URL
	u, err := url.Parse(link)
	if err != nil || !strings.HasSuffix(link, "&") {
		t.Fatalf("URL %q, want a query ending in & as Discord's", link)
	}
	q := u.Query()
	ex, err1 := strconv.ParseInt(q.Get("ex"), 16, 64)
	is, err2 := strconv.ParseInt(q.Get("is"), 16, 64)
	if err1 != nil || err2 != nil || len(q.Get("hm")) != 64 || ex-is != int64(DefaultURLTTL/time.Second) ||
		time.Unix(is, 0).Sub(time.Now()).Abs() > time.Minute {
		t.Fatalf("query %v, want ex = is + 24h in hex, is now, and a 64-digit hm", q)
	}
	if code, body := get(t, link); code != http.StatusOK || body != "data" {
		t.Fatalf("GET the URL: %d %q, want the file", code, body)
	}

	later := strconv.FormatInt(ex+3600, 16)
	bad := map[string]string{
		"no query":          strings.Split(link, "?")[0],
		"another signature": strings.Replace(link, "hm="+q.Get("hm"), "hm="+strings.Repeat("0", 64), 1),
		"a later ex":        strings.Replace(link, "ex="+q.Get("ex"), "ex="+later, 1),
	}
	for name, l := range bad {
		if code, body := get(t, l); code != http.StatusNotFound || strings.TrimSpace(body) != goneBody {
			t.Errorf("%s: %d %q, want 404 %q", name, code, body, goneBody)
		}
	}

	s.SetCDNClock(func() time.Time { return time.Now().Add(DefaultURLTTL + time.Minute) })
	if code, _ := get(t, link); code != http.StatusNotFound {
		t.Errorf("a day and a minute later: %d, want 404", code)
	}
	s.SetCDNClock(time.Now)
	s.SetURLTTL(-time.Second)
	expired := s.SendDM(alice, "", File{Name: "b.txt", Data: []byte("b")}).Attachments[0].URL
	if code, _ := get(t, expired); code != http.StatusNotFound {
		t.Errorf("a URL signed with a negative TTL: %d, want 404", code)
	}
}

// TestRefreshURLs: POST /attachments/refresh-urls wants the bot token and
// at most 50 URLs, signs those of known files afresh, leaves out the
// others, and takes injected faults like every route.
func TestRefreshURLs(t *testing.T) {
	s := newServer(t)
	s.SetURLTTL(-time.Hour)
	link := s.SendDM(alice, "", File{Name: "c.txt", Data: []byte("c")}).Attachments[0].URL
	s.SetURLTTL(DefaultURLTTL)
	unknown := s.URL() + "/attachments/1/2/none.txt?ex=1&is=1&hm=00&"

	var e apiError
	invalid := []struct {
		name string
		body any
		auth bool
		code int
		want string
	}{
		{"no token", map[string]any{"attachment_urls": []string{link}}, false, 401, "401: Unauthorized"},
		{"not an object", "attachment_urls", true, 400, "invalid JSON"},
		{"no attachment_urls", map[string]any{}, true, 400, "BASE_TYPE_REQUIRED"},
		{"not strings", map[string]any{"attachment_urls": []int{1}}, true, 400, "MODEL_TYPE_CONVERT"},
		{"51 URLs", map[string]any{"attachment_urls": make([]string, 51)}, true, 400, "BASE_TYPE_MAX_LENGTH"},
	}
	for _, c := range invalid {
		e = apiError{}
		if code := call(t, s, "POST", "attachments/refresh-urls", c.body, c.auth, &e); code != c.code ||
			!strings.Contains(e.Message+string(e.Errors), c.want) {
			t.Errorf("%s: %d %+v, want %d %s", c.name, code, e, c.code, c.want)
		}
	}

	var out struct {
		Refreshed []refreshedURL `json:"refreshed_urls"`
	}
	urls := append(make([]string, 48), link, unknown)
	if code := call(t, s, "POST", "attachments/refresh-urls", map[string]any{"attachment_urls": urls}, true, &out); code != 200 ||
		len(out.Refreshed) != 1 || out.Refreshed[0].Original != link || out.Refreshed[0].Refreshed == link {
		t.Fatalf("refresh of 50 URLs: %d %+v, want the one known URL refreshed", code, out)
	}
	if code, body := get(t, out.Refreshed[0].Refreshed); code != http.StatusOK || body != "c" {
		t.Errorf("GET the refreshed URL: %d %q, want the file", code, body)
	}

	s.Inject(RouteRefreshURLs, Fault{Status: 429, RetryAfter: 0.5})
	if code := call(t, s, "POST", "attachments/refresh-urls", map[string]any{"attachment_urls": []string{link}}, true, &e); code != 429 {
		t.Errorf("with a 429 injected: %d, want 429", code)
	}
	if n := s.Count(RouteRefreshURLs); n != len(invalid)+2 {
		t.Errorf("%d calls recorded, want %d", n, len(invalid)+2)
	}
}

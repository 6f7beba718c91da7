package discordtest

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// DefaultURLTTL is how long a signed attachment URL stays valid, as on
// Discord.
const DefaultURLTTL = 24 * time.Hour

// maxRefreshURLs is the most URLs one refresh-urls request may name.
const maxRefreshURLs = 50

// goneBody is what Discord's CDN answers, with 404, to an attachment URL
// that is expired, wrongly signed or unknown.
const goneBody = "This content is no longer available."

// SetURLTTL changes how long the attachment URLs signed from now on stay
// valid (DefaultURLTTL). A negative ttl signs URLs that have expired
// already.
func (s *Server) SetURLTTL(ttl time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.urlTTL = ttl
}

// SetCDNClock replaces the clock by which the CDN signs attachment URLs
// and checks their expiry (time.Now), so a test can expire a URL whose ex
// still looks valid to the bot.
func (s *Server) SetCDNClock(now func() time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cdnClock = now
}

func newCDNKey() []byte {
	k := make([]byte, 32)
	_, _ = rand.Read(k) // crypto/rand.Read never fails
	return k
}

// signedURLLocked is the URL of a stored file (key: channel/id/name),
// signed now: ex and is are hex Unix times, hm an HMAC of the path and
// both, and the query ends with "&" as Discord's does.
func (s *Server) signedURLLocked(key string) string {
	channelID, rest, _ := strings.Cut(key, "/")
	id, name, _ := strings.Cut(rest, "/")
	now := s.cdnClock()
	ex := strconv.FormatInt(now.Add(s.urlTTL).Unix(), 16)
	is := strconv.FormatInt(now.Unix(), 16)
	q := "ex=" + ex + "&is=" + is + "&hm=" + s.cdnMAC(key, ex, is) + "&"
	return s.srv.URL + "/attachments/" + channelID + "/" + id + "/" + url.PathEscape(name) + "?" + q
}

func (s *Server) cdnMAC(key, ex, is string) string {
	m := hmac.New(sha256.New, s.cdnKey)
	m.Write([]byte(key + "\x00" + ex + "\x00" + is))
	return hex.EncodeToString(m.Sum(nil))
}

// validLinkLocked reports whether q signs the stored file key and has not
// expired by the CDN's clock.
func (s *Server) validLinkLocked(key string, q url.Values) bool {
	ex, is, hm := q.Get("ex"), q.Get("is"), q.Get("hm")
	expiry, err := strconv.ParseInt(ex, 16, 64)
	if err != nil || is == "" || !hmac.Equal([]byte(hm), []byte(s.cdnMAC(key, ex, is))) {
		return false
	}
	return s.cdnClock().Unix() <= expiry
}

// attachment serves a stored file, as Discord's CDN does (no token, a
// signed URL): with its Content-Length, or chunked without one
// (File.Chunked).
func (s *Server) attachment(req *request) {
	key := req.args[0] + "/" + req.args[1] + "/" + req.args[2]
	s.mu.Lock()
	f, ok := s.files[key]
	ok = ok && s.validLinkLocked(key, req.r.URL.Query())
	s.mu.Unlock()
	if !ok {
		http.Error(req.w, goneBody, http.StatusNotFound)
		return
	}
	req.w.Header().Set("Content-Type", "application/octet-stream")
	if f.chunked {
		// Headers flushed before the body leave net/http no length to
		// send: the body goes out chunked.
		req.w.WriteHeader(http.StatusOK)
		_ = http.NewResponseController(req.w).Flush()
	} else {
		req.w.Header().Set("Content-Length", strconv.Itoa(len(f.data)))
	}
	_, _ = req.w.Write(f.data)
}

// refreshedURL is one entry of a refresh-urls answer.
type refreshedURL struct {
	Original  string `json:"original"`
	Refreshed string `json:"refreshed"`
}

// refreshURLs signs the URLs of attachments afresh (whatever their query
// says), as Discord's POST /attachments/refresh-urls does; URLs of files
// the fake does not hold are left out of the answer.
func (s *Server) refreshURLs(req *request) {
	var body struct {
		URLs json.RawMessage `json:"attachment_urls"`
	}
	if err := json.Unmarshal(req.body, &body); err != nil {
		writeError(req.w, http.StatusBadRequest, 50109, "The request body contains invalid JSON.")
		return
	}
	var urls []string
	switch {
	case len(body.URLs) == 0 || string(body.URLs) == "null":
		formError(req.w, "attachment_urls", "BASE_TYPE_REQUIRED", "This field is required")
		return
	case json.Unmarshal(body.URLs, &urls) != nil:
		formError(req.w, "attachment_urls", "MODEL_TYPE_CONVERT", "Only iterables may be used in a ListType")
		return
	case len(urls) > maxRefreshURLs:
		formError(req.w, "attachment_urls", "BASE_TYPE_MAX_LENGTH", "Must be 50 or fewer in length.")
		return
	}
	out := []refreshedURL{}
	s.mu.Lock()
	for _, raw := range urls {
		if key, ok := s.fileKeyLocked(raw); ok {
			out = append(out, refreshedURL{Original: raw, Refreshed: s.signedURLLocked(key)})
		}
	}
	s.mu.Unlock()
	writeJSON(req.w, http.StatusOK, map[string][]refreshedURL{"refreshed_urls": out})
}

// fileKeyLocked finds the stored file an attachment URL of this CDN
// names.
func (s *Server) fileKeyLocked(raw string) (string, bool) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme+"://"+u.Host != s.srv.URL {
		return "", false
	}
	key, ok := strings.CutPrefix(u.Path, "/attachments/")
	if _, held := s.files[key]; !ok || !held {
		return "", false
	}
	return key, true
}

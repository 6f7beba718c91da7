package doctor

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/latchd/latch/agent/provider/anthropic/anthropictest"
)

// anthropicModels starts anthropictest, the fake of the Messages and
// Models APIs, accepting key and offering models; its URL is the API root,
// as [agent] base_url expects.
func anthropicModels(t *testing.T, key string, models ...string) *anthropictest.Server {
	t.Helper()
	srv := anthropictest.New(key)
	t.Cleanup(srv.Close)
	srv.Models(models...)
	return srv
}

// modelPaths is the path of every request srv received, in order.
func modelPaths(srv *anthropictest.Server) []string {
	var out []string
	for _, r := range srv.Requests() {
		out = append(out, r.Path)
	}
	return out
}

// modelsAPI fakes OpenAI's GET /v1/models, which openaitest (a fake of
// the chat endpoint) does not serve, in the API's JSON and error shapes,
// checking the key the way the API does, so the real SDK is on the path
// under test. An OpenAI-compatible server without a model list is
// openaitest itself, which answers 404 there.
type modelsAPI struct {
	srv *httptest.Server
	key string

	mu     sync.Mutex
	models []string
}

// newModelsAPI starts a fake that accepts key and offers models. URL()
// ends in /v1, as the base_url setting expects.
func newModelsAPI(t *testing.T, key string, models ...string) *modelsAPI {
	t.Helper()
	m := &modelsAPI{key: key, models: models}
	m.srv = httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(m.srv.Close)
	return m
}

func (m *modelsAPI) URL() string { return m.srv.URL + "/v1" }

func (m *modelsAPI) serve(w http.ResponseWriter, r *http.Request) {
	m.mu.Lock()
	models := slices.Clone(m.models)
	m.mu.Unlock()
	m.serveOpenAI(w, r, models)
}

func (m *modelsAPI) serveOpenAI(w http.ResponseWriter, r *http.Request, models []string) {
	fail := func(status int, code, msg string) {
		writeJSON(w, status, map[string]any{"error": map[string]any{
			"message": msg, "type": "invalid_request_error", "param": nil, "code": code}})
	}
	key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	switch {
	case !ok || key == "":
		fail(http.StatusUnauthorized, "", "You didn't provide an API key.")
		return
	case key != m.key:
		// OpenAI repeats the ends of a wrong key.
		fail(http.StatusUnauthorized, "invalid_api_key", fmt.Sprintf("Incorrect API key provided: %s***%s.", key[:3], key[len(key)-4:]))
		return
	case r.Method != http.MethodGet || r.URL.Path != "/v1/models":
		fail(http.StatusNotFound, "", fmt.Sprintf("Invalid URL (%s %s)", r.Method, r.URL.Path))
		return
	}
	data := []map[string]any{}
	for _, id := range models {
		data = append(data, map[string]any{"id": id, "object": "model", "created": 1700000000, "owned_by": "fake"})
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

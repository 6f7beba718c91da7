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
)

// modelsAPI fakes the model-listing endpoints doctor calls, which
// anthropictest and openaitest (fakes of the chat endpoints) do not serve:
// Anthropic's GET /v1/models and /v1/models/{id}, and OpenAI's GET
// /v1/models. It answers in each API's JSON and error shapes and checks
// the key the way each API does, so the real SDKs are on the path under
// test. An OpenAI-compatible server without a model list is
// openaitest itself, which answers 404 there.
type modelsAPI struct {
	srv       *httptest.Server
	key       string
	anthropic bool

	mu     sync.Mutex
	models []string
	paths  []string // request paths, in order
}

// newModelsAPI starts a fake that accepts key and offers models. For
// Anthropic, URL() is the API root; for OpenAI it ends in /v1, as the
// base_url settings expect.
func newModelsAPI(t *testing.T, anthropic bool, key string, models ...string) *modelsAPI {
	t.Helper()
	m := &modelsAPI{key: key, anthropic: anthropic, models: models}
	m.srv = httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(m.srv.Close)
	return m
}

func (m *modelsAPI) URL() string {
	if m.anthropic {
		return m.srv.URL
	}
	return m.srv.URL + "/v1"
}

func (m *modelsAPI) requests() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.paths)
}

func (m *modelsAPI) serve(w http.ResponseWriter, r *http.Request) {
	m.mu.Lock()
	m.paths = append(m.paths, r.URL.Path)
	models := slices.Clone(m.models)
	m.mu.Unlock()
	if m.anthropic {
		m.serveAnthropic(w, r, models)
	} else {
		m.serveOpenAI(w, r, models)
	}
}

func (m *modelsAPI) serveAnthropic(w http.ResponseWriter, r *http.Request, models []string) {
	fail := func(status int, typ, msg string) {
		writeJSON(w, status, map[string]any{"type": "error", "request_id": "req_fake",
			"error": map[string]string{"type": typ, "message": msg}})
	}
	key := r.Header.Get("X-Api-Key")
	if bearer, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && key == "" {
		key = bearer
	}
	switch {
	case key == "":
		fail(http.StatusUnauthorized, "authentication_error", "x-api-key header is required")
		return
	case key != m.key:
		fail(http.StatusUnauthorized, "authentication_error", "invalid x-api-key")
		return
	case r.Header.Get("Anthropic-Version") == "":
		fail(http.StatusBadRequest, "invalid_request_error", "anthropic-version: header is required")
		return
	case r.Method != http.MethodGet:
		fail(http.StatusNotFound, "not_found_error", "Not Found")
		return
	}
	info := func(id string) map[string]any {
		return map[string]any{"type": "model", "id": id, "display_name": "Display " + id,
			"created_at": "2025-09-29T00:00:00Z"}
	}
	if r.URL.Path == "/v1/models" {
		data := []map[string]any{}
		for _, id := range models {
			data = append(data, info(id))
		}
		first, last := "", ""
		if len(models) > 0 {
			first, last = models[0], models[len(models)-1]
		}
		writeJSON(w, http.StatusOK, map[string]any{"data": data, "has_more": false, "first_id": first, "last_id": last})
		return
	}
	id, ok := strings.CutPrefix(r.URL.Path, "/v1/models/")
	if !ok || id == "" || strings.Contains(id, "/") {
		fail(http.StatusNotFound, "not_found_error", "Not Found")
		return
	}
	if !slices.Contains(models, id) {
		fail(http.StatusNotFound, "not_found_error", "model: "+id)
		return
	}
	writeJSON(w, http.StatusOK, info(id))
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

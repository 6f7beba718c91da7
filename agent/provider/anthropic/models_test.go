package anthropic_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/latchd/latch/agent/provider"
	"github.com/latchd/latch/agent/provider/anthropic"
)

func TestModel(t *testing.T) {
	t.Parallel()
	c, srv := setup(t, nil)
	srv.Models("claude-opus-4-1", "claude-sonnet-4-5")
	m, err := c.Model(t.Context(), "claude-sonnet-4-5")
	if err != nil {
		t.Fatalf("Model: %v", err)
	}
	want := anthropic.ModelInfo{ID: "claude-sonnet-4-5", DisplayName: "Claude Sonnet 4.5", CreatedAt: time.Date(2025, 9, 29, 0, 0, 0, 0, time.UTC)}
	if m != want {
		t.Errorf("Model = %+v, want %+v", m, want)
	}
	r := srv.Requests()[0]
	if r.Method != http.MethodGet || r.Path != "/v1/models/claude-sonnet-4-5" || r.Header.Get("X-Api-Key") != testKey ||
		r.Header.Get("Anthropic-Version") != "2023-06-01" {
		t.Errorf("request = %s %s %v, want GET /v1/models/claude-sonnet-4-5 with the key and version", r.Method, r.Path, r.Header)
	}

	_, err = c.Model(t.Context(), "claude-nope")
	var pe *provider.Error
	if !errors.As(err, &pe) || !errors.Is(err, provider.ErrModel) || pe.Status != 404 || pe.Type != "not_found_error" || pe.Model != "claude-nope" {
		t.Errorf("unknown model: err = %#v, want ErrModel 404 not_found_error", err)
	}
	// An id cannot step to another path.
	_, err = c.Model(t.Context(), "../messages")
	if !errors.Is(err, provider.ErrModel) {
		t.Errorf("id with a slash: err = %v, want ErrModel", err)
	}
	if last := srv.Requests()[len(srv.Requests())-1]; last.Path != "/v1/models/../messages" || last.Method != http.MethodGet {
		t.Errorf("request = %s %s, want the id as one path segment", last.Method, last.Path)
	}
	if _, err := c.Model(t.Context(), ""); !errors.Is(err, provider.ErrModel) {
		t.Errorf("empty id: err = %v, want ErrModel", err)
	}
}

func TestModelAuth(t *testing.T) {
	t.Parallel()
	const wrong = "sk-ant-api03-WRONG-9876543210"
	for _, key := range []string{wrong, ""} {
		c, _ := setup(t, func(c *anthropic.Config) { c.APIKey = key })
		_, err := c.Model(t.Context(), testModel)
		var pe *provider.Error
		if !errors.As(err, &pe) || !errors.Is(err, provider.ErrAuth) || pe.Status != 401 || pe.NoKey != (key == "") {
			t.Errorf("key %q: err = %v, want ErrAuth 401", key, err)
		}
		if strings.Contains(err.Error(), wrong) {
			t.Errorf("key leaked: %v", err)
		}
	}
}

func TestModels(t *testing.T) {
	t.Parallel()
	c, srv := setup(t, nil)
	var ids []string
	for i := range 2500 {
		ids = append(ids, fmt.Sprintf("claude-%04d", i))
	}
	srv.Models(ids...)
	got, err := c.Models(t.Context())
	if err != nil {
		t.Fatalf("Models: %v", err)
	}
	if len(got) != len(ids) {
		t.Fatalf("got %d models, want %d", len(got), len(ids))
	}
	for i := range ids {
		if got[i].ID != ids[i] {
			t.Fatalf("model %d = %s, want %s: the API's order", i, got[i].ID, ids[i])
		}
	}
	if n := len(srv.Requests()); n != 3 {
		t.Errorf("%d requests, want 3 pages of up to 1000", n)
	}

	c2, srv2 := setup(t, nil)
	srv2.Models()
	if got, err := c2.Models(t.Context()); err != nil || len(got) != 0 {
		t.Errorf("no models: Models = %v, %v; want none", got, err)
	}
}

// A timeout is reported so that errors.Is can tell it from a refusal.
func TestModelTimeouts(t *testing.T) {
	t.Parallel()
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	t.Cleanup(hang.Close)
	c, err := anthropic.New(anthropic.Config{APIKey: testKey, BaseURL: hang.URL, Model: testModel,
		HTTPClient: &http.Client{Timeout: 100 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Model(t.Context(), testModel); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("client timeout: err = %v, want context.DeadlineExceeded", err)
	}
	c, _ = anthropic.New(anthropic.Config{APIKey: testKey, BaseURL: hang.URL, Model: testModel})
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if _, err := c.Models(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("context deadline: err = %v, want context.DeadlineExceeded", err)
	}
}

func TestModelUnreachable(t *testing.T) {
	t.Parallel()
	hang := httptest.NewServer(http.NotFoundHandler())
	url := hang.URL
	hang.Close()
	c, _ := anthropic.New(anthropic.Config{APIKey: testKey, BaseURL: url + "/gw?key=" + testKey, Model: testModel})
	_, err := c.Model(t.Context(), testModel)
	var pe *provider.Error
	if !errors.As(err, &pe) || !errors.Is(err, provider.ErrUnavailable) || pe.Status != 0 || !strings.Contains(pe.Message, "connection refused") {
		t.Fatalf("err = %v, want ErrUnavailable saying connection refused", err)
	}
	if strings.Contains(err.Error(), testKey) || strings.Contains(err.Error(), "/gw") {
		t.Errorf("error shows the base URL's path or query: %v", err)
	}
}

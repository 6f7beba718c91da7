package anthropic

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// ModelInfo describes a model, as the Models API does.
type ModelInfo struct {
	ID          string
	DisplayName string    // "Claude Sonnet 4.5"; may be empty
	CreatedAt   time.Time // zero if the API did not say
}

// modelObject is a model in the Models API:
// {"type":"model","id":…,"display_name":…,"created_at":"2025-09-29T00:00:00Z"}.
type modelObject struct {
	ID          string `json:"id"`
	DisplayName string `json:"display_name"`
	CreatedAt   string `json:"created_at"`
}

func (m modelObject) info() ModelInfo {
	t, _ := time.Parse(time.RFC3339, m.CreatedAt)
	return ModelInfo{ID: m.ID, DisplayName: m.DisplayName, CreatedAt: t}
}

const (
	// modelsPageSize is the most models a page of GET /v1/models may hold.
	modelsPageSize = 1000
	// maxModelPages bounds Models against a server whose pages never end.
	maxModelPages = 20
	// maxModelsBody bounds one answer of the Models API.
	maxModelsBody = 8 << 20
)

// Model asks the API about the model id (GET /v1/models/{id}), which
// proves the endpoint answers, accepts the key and offers the model,
// without the cost of a call to the model. An alias such as
// "claude-sonnet-4-5" is answered with the model it stands for.
//
// A failure is a *provider.Error, as from Stream — a model the API does
// not offer is ErrModel with Status 404 — except that when ctx ends, or
// the HTTP client's own Timeout runs out, the error matches ctx.Err() or
// context.DeadlineExceeded with errors.Is. Nothing is retried.
func (c *Client) Model(ctx context.Context, id string) (ModelInfo, error) {
	if id == "" {
		return ModelInfo{}, c.core.NoModel()
	}
	u := c.base.JoinPath("v1", "models")
	// Escaped, so that an id cannot reach another path.
	u.RawPath = u.EscapedPath() + "/" + url.PathEscape(id)
	u.Path += "/" + id
	var m modelObject
	if err := c.get(ctx, u, id, &m); err != nil {
		return ModelInfo{}, err
	}
	return m.info(), nil
}

// Models lists the models the API offers to this key (GET /v1/models), in
// the API's order, most recently released first. Failures are as for
// Model.
func (c *Client) Models(ctx context.Context) ([]ModelInfo, error) {
	var out []ModelInfo
	after := ""
	for range maxModelPages {
		u := c.base.JoinPath("v1", "models")
		q := url.Values{"limit": {strconv.Itoa(modelsPageSize)}}
		if after != "" {
			q.Set("after_id", after)
		}
		u.RawQuery = q.Encode()
		var page struct {
			Data    []modelObject `json:"data"`
			HasMore bool          `json:"has_more"`
			LastID  string        `json:"last_id"`
		}
		if err := c.get(ctx, u, c.core.Model, &page); err != nil {
			return nil, err
		}
		for _, m := range page.Data {
			out = append(out, m.info())
		}
		if !page.HasMore || page.LastID == "" || page.LastID == after {
			break
		}
		after = page.LastID
	}
	return out, nil
}

// get makes a GET request to the API and decodes its JSON answer into v.
func (c *Client) get(ctx context.Context, u *url.URL, model string, v any) error {
	req, err := c.newRequest(ctx, http.MethodGet, u, nil)
	if err != nil {
		return c.netError(err, model)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.core.HTTP.Do(req)
	if err != nil {
		return c.callError(ctx, err, model)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return c.responseError(resp, model)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxModelsBody))
	if err != nil {
		return c.callError(ctx, err, model)
	}
	if err := json.Unmarshal(b, v); err != nil {
		e := c.core.StreamBroken(model, "the answer is not the JSON of the Models API")
		e.Status, e.Temporary = resp.StatusCode, false
		return e
	}
	return nil
}

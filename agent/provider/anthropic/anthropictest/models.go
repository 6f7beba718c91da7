package anthropictest

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// modelCreated is the created_at of every model the fake lists.
const modelCreated = "2025-09-29T00:00:00Z"

// serveModels answers GET /v1/models (paged with limit and after_id, as
// the API pages it) and GET /v1/models/{id}.
func (s *Server) serveModels(w http.ResponseWriter, r *http.Request, reqID string) {
	list := s.api.ModelList()
	w.Header().Set("Request-Id", reqID)
	if id, ok := strings.CutPrefix(r.URL.Path, "/v1/models/"); ok {
		if id == "" || strings.Contains(id, "/") || !s.api.KnowsModel(id) {
			writeError(w, reqID, &apiError{status: http.StatusNotFound, typ: "not_found_error", msg: "model: " + id})
			return
		}
		writeJSON(w, modelObject(id))
		return
	}
	q := r.URL.Query()
	limit := 20
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			writeError(w, reqID, invalid("limit: Input should be between 1 and 1000"))
			return
		}
		limit = n
	}
	if after := q.Get("after_id"); after != "" {
		i := slices.Index(list, after)
		if i < 0 {
			writeError(w, reqID, invalid("after_id: unknown model "+after))
			return
		}
		list = list[i+1:]
	}
	page := list[:min(limit, len(list))]
	data := []any{}
	for _, id := range page {
		data = append(data, modelObject(id))
	}
	var first, last any // null for an empty page, as from the API
	if len(page) > 0 {
		first, last = page[0], page[len(page)-1]
	}
	writeJSON(w, map[string]any{"data": data, "has_more": len(list) > len(page), "first_id": first, "last_id": last})
}

func modelObject(id string) map[string]any {
	return map[string]any{"type": "model", "id": id, "display_name": displayName(id), "created_at": modelCreated}
}

// displayName is the display_name the fake gives a model id, in the API's
// style: "claude-sonnet-4-5" is "Claude Sonnet 4.5", "claude-3-5-haiku"
// "Claude 3.5 Haiku".
func displayName(id string) string {
	var words []string
	for _, w := range strings.Split(id, "-") {
		if w == "" {
			continue
		}
		n := len(words)
		if n > 0 && isNumber(w) && isNumber(strings.ReplaceAll(words[n-1], ".", "")) {
			words[n-1] += "." + w
			continue
		}
		r := []rune(w)
		r[0] = unicode.ToUpper(r[0])
		words = append(words, string(r))
	}
	return strings.Join(words, " ")
}

func isNumber(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == "" && len(s) < 8 // not a date
}

func writeJSON(w http.ResponseWriter, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

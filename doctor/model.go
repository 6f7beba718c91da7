package doctor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/latchd/latch/agent/provider"
	"github.com/latchd/latch/agent/provider/anthropic"
	"github.com/latchd/latch/config"
)

// openAIBaseURL is the OpenAI API, used when [agent] base_url is empty. It
// matches the adapter's default.
const openAIBaseURL = "https://api.openai.com/v1"

// maxListed is how many available models a failure suggests.
const maxListed = 5

// checkModel asks the provider whether the configured model exists, which
// also proves the endpoint answers and accepts the key. Listing models
// costs nothing, unlike a call to the model.
func (r *run) checkModel(ctx context.Context) Check {
	if r.cfg == nil {
		return skip("needs a config that loads")
	}
	a := r.cfg.Agent
	switch a.Provider {
	case config.ProviderAnthropic:
		return r.checkAnthropic(ctx, a)
	case config.ProviderOpenAI:
		return r.checkOpenAI(ctx, a)
	case config.ProviderClaudeCode, config.ProviderCodex:
		return r.checkCoder(ctx, a)
	}
	return skip("[agent] provider is none: no model; the chat runs !commands only")
}

func (r *run) checkAnthropic(ctx context.Context, a config.AgentConfig) Check {
	base := cmp.Or(a.BaseURL, anthropic.DefaultBaseURL)
	// The adapter's own client: only the settings latch resolved count,
	// nothing from the environment.
	client, err := anthropic.New(anthropic.Config{APIKey: a.APIKey, BaseURL: base, Model: a.Model, HTTPClient: r.d.httpClient()})
	if err != nil {
		return fail(err.Error(), "set [agent] base_url in "+r.cfg.Path+" to an http:// or https:// URL")
	}
	m, err := client.Model(ctx, a.Model)
	if err == nil {
		name := m.ID
		if m.DisplayName != "" {
			name += " (" + m.DisplayName + ")"
		}
		return ok(fmt.Sprintf("anthropic: %s at %s", name, base))
	}
	var pe *provider.Error
	switch {
	case !errors.As(err, &pe):
		return r.unreachable(base, err) // a timeout
	case pe.Status == 0:
		return r.unreachable(base, errors.New(pe.Message))
	case pe.Status != http.StatusNotFound:
		return r.providerStatus(pe.Status, pe.Message)
	}
	models, lerr := client.Models(ctx)
	if lerr != nil {
		return fail(fmt.Sprintf("anthropic at %s does not know the model %q (404)", base, a.Model), r.modelFix())
	}
	ids := make([]string, 0, len(models))
	for _, m := range models {
		ids = append(ids, m.ID)
	}
	return r.unknownModel("anthropic", base, ids)
}

func (r *run) checkOpenAI(ctx context.Context, a config.AgentConfig) Check {
	base := cmp.Or(a.BaseURL, openAIBaseURL)
	conf := goopenai.DefaultConfig(a.APIKey) // an empty key sends no Authorization header
	conf.BaseURL = base
	conf.HTTPClient = r.d.httpClient()
	list, err := goopenai.NewClientWithConfig(conf).ListModels(ctx)
	if err != nil {
		var apiErr *goopenai.APIError
		var reqErr *goopenai.RequestError
		status, msg := 0, ""
		switch {
		case errors.As(err, &apiErr):
			status, msg = apiErr.HTTPStatusCode, apiErr.Message
		case errors.As(err, &reqErr):
			status = reqErr.HTTPStatusCode
		default:
			return r.unreachable(base, err)
		}
		if status == http.StatusNotFound {
			// Some local servers serve chat completions but no model list.
			return warn(fmt.Sprintf("the server at %s does not list its models (GET /models: 404), so whether it serves %q is not checked",
				base, a.Model), "none needed; if the model is wrong, the first message to the agent will say so")
		}
		return r.providerStatus(status, msg)
	}
	ids := make([]string, 0, len(list.Models))
	for _, m := range list.Models {
		// Ollama lists "llama3.2:latest" and serves it as "llama3.2" too.
		if m.ID == a.Model || m.ID == a.Model+":latest" {
			return ok(fmt.Sprintf("openai: %s at %s", a.Model, base))
		}
		ids = append(ids, m.ID)
	}
	if len(ids) == 0 {
		return warn(fmt.Sprintf("the server at %s lists no models, so whether it serves %q is not checked", base, a.Model),
			"none needed if the server loads models on demand; otherwise load or pull the model there")
	}
	return r.unknownModel("openai", base, ids)
}

// unknownModel fails for a model the provider does not list, suggesting
// the listed ones most like the configured name.
func (r *run) unknownModel(provider, base string, ids []string) Check {
	model := r.cfg.Agent.Model
	if len(ids) == 0 {
		return fail(fmt.Sprintf("%s at %s does not offer the model %q, and lists none", provider, base, model), r.modelFix())
	}
	near := closest(model, ids, maxListed)
	more := ""
	if len(ids) > len(near) {
		more = fmt.Sprintf(" (of %d)", len(ids))
	}
	return fail(fmt.Sprintf("%s at %s does not offer the model %q; it offers %s%s", provider, base, model, strings.Join(near, ", "), more),
		"set [agent] model in "+r.cfg.Path+" to one of them")
}

// closest returns up to n of ids, those sharing the longest prefix with
// model first, otherwise in the provider's order.
func closest(model string, ids []string, n int) []string {
	sorted := slices.Clone(ids)
	slices.SortStableFunc(sorted, func(a, b string) int {
		return cmp.Compare(commonPrefix(model, b), commonPrefix(model, a))
	})
	return sorted[:min(n, len(sorted))]
}

func commonPrefix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

func (r *run) modelFix() string {
	return "set [agent] model in " + r.cfg.Path + " to a model the provider offers (and check [agent] base_url)"
}

// providerStatus turns a refusal other than "no such model" into a check.
// The provider's message is left out for 401 and 403: some repeat part of
// the key.
func (r *run) providerStatus(status int, msg string) Check {
	a := r.cfg.Agent
	switch {
	case status == http.StatusUnauthorized && a.APIKey == "":
		return fail(fmt.Sprintf("%s needs an API key (401) and none is set", a.Provider), r.keyFix())
	case status == http.StatusUnauthorized:
		return fail(fmt.Sprintf("%s rejected the API key (401)", a.Provider), r.keyFix())
	case status == http.StatusForbidden:
		return fail(fmt.Sprintf("%s refused this API key access (403)", a.Provider),
			"check what the key may use in the provider's console, or "+r.keyFix())
	case status == http.StatusTooManyRequests || status >= 500:
		return warn(fmt.Sprintf("%s is rate-limiting or failing (%d %s)", a.Provider, status, shortLine(msg)), "try again in a minute")
	}
	return fail(fmt.Sprintf("%s refused the request (%d %s)", a.Provider, status, shortLine(msg)),
		"check [agent] base_url and api_key in "+r.cfg.Path)
}

// keyFix says where to put a working API key, naming the setting the
// current one came from.
func (r *run) keyFix() string {
	a, path := r.cfg.Agent, r.cfg.Path
	switch a.APIKeySource {
	case config.SourceAPIKey, "":
		return "put a valid key in [agent] api_key in " + path
	case config.SourceAPIKeyFile:
		return fmt.Sprintf("put a valid key in %s ([agent] api_key_file)", a.APIKeyFile)
	}
	return fmt.Sprintf("put a valid key in %s, or in [agent] api_key in %s (which wins)", a.APIKeySource, path)
}

func (r *run) unreachable(base string, err error) Check {
	return fail(fmt.Sprintf("cannot reach %s at %s: %s", r.cfg.Agent.Provider, base, r.netError(err)),
		"check that the server runs, the network, and [agent] base_url in "+r.cfg.Path)
}

// shortLine keeps a provider's message to one short line.
func shortLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > 200 {
		s = string(r[:200]) + "…"
	}
	return s
}

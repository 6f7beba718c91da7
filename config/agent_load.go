package config

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
)

// providerEnv is what each provider falls back on.
var providerEnv = map[string]struct{ model, apiKey, baseURL string }{
	ProviderAnthropic: {DefaultAnthropicModel, EnvAnthropicAPIKey, EnvAnthropicBaseURL},
	ProviderOpenAI:    {DefaultOpenAIModel, EnvOpenAIAPIKey, EnvOpenAIBaseURL},
	// The CLIs choose their own default model.
	ProviderClaudeCode: {"", EnvAnthropicAPIKey, EnvAnthropicBaseURL},
	ProviderCodex:      {"", EnvOpenAIAPIKey, EnvOpenAIBaseURL},
}

// defaultAgent is the agent configuration when config.toml sets nothing.
func defaultAgent(home string) AgentConfig {
	return AgentConfig{
		Workspace:       filepath.Join(home, DefaultWorkspace),
		BashTimeout:     DefaultBashTimeout,
		Provider:        DefaultProvider,
		MaxTokens:       DefaultMaxTokens,
		MaxSteps:        DefaultMaxSteps,
		RequestTimeout:  DefaultRequestTimeout,
		ContextBudget:   DefaultContextBudget,
		ApprovalTimeout: DefaultApprovalTimeout,
		ShutdownGrace:   DefaultShutdownGrace,
		InboxMaxMB:      DefaultInboxMaxMB,
		Permissions:     DefaultPermissions(),
		ClaudeCode:      ClaudeCodeConfig{Timeout: DefaultCoderTimeout},
		Codex:           CodexConfig{Timeout: DefaultCoderTimeout},
	}
}

// badFunc records a validation error of config.toml for a key.
type badFunc func(key, format string, args ...any)

// applyAgentFile copies the agent settings of config.toml, other than
// workspace and bash_timeout, into cfg. The API key file is read later, in
// applyAgentEnv, as the provider may make it unnecessary.
func (l Loader) applyAgentFile(cfg *Config, a *fileAgent) []error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s: %s", cfg.Path, key, fmt.Sprintf(format, args...)))
	}
	l.applyModelFile(cfg, a, bad)
	applyLimitsFile(&cfg.Agent, a, bad)
	applyPermissionsFile(&cfg.Agent, a.Permissions, bad)
	applyCoderFile(&cfg.Agent, a, bad)
	for i, s := range a.Fetch.Allow {
		p, err := parseAllow(s)
		if err != nil {
			bad("agent.fetch.allow", "entry %d: %v", i+1, err)
			continue
		}
		cfg.Agent.FetchAllow = append(cfg.Agent.FetchAllow, p)
	}
	return errs
}

// applyModelFile applies provider, model, base_url, api_key and
// api_key_file. They are checked even with provider "none", so that a
// mistake shows when the file is written, not when the provider is switched
// on.
func (l Loader) applyModelFile(cfg *Config, a *fileAgent, bad badFunc) {
	ag := &cfg.Agent
	switch a.Provider {
	case "":
	case ProviderNone, ProviderAnthropic, ProviderOpenAI, ProviderClaudeCode, ProviderCodex:
		ag.Provider = a.Provider
	default:
		bad("agent.provider", "%s is not a provider; use %q, %q, %q, %q or %q",
			quoteValue(a.Provider), ProviderAnthropic, ProviderOpenAI, ProviderClaudeCode, ProviderCodex, ProviderNone)
	}
	if a.Model != "" {
		if strings.ContainsFunc(a.Model, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) {
			bad("agent.model", "has a space or a control character, which no model name has")
		}
		ag.Model = a.Model
	}
	if a.BaseURL != "" {
		u, err := validateAPIURL(a.BaseURL)
		if err != nil {
			bad("agent.base_url", "%v", err)
		}
		ag.BaseURL = u
	}
	switch {
	case a.APIKey != "" && a.APIKeyFile != "":
		bad("agent.api_key", "api_key and api_key_file are both set; keep one")
	case a.APIKey != "":
		ag.APIKey, ag.APIKeySource = strings.TrimSpace(a.APIKey), SourceAPIKey
		if ag.APIKey == "" {
			bad("agent.api_key", "is only whitespace; for no key, leave api_key out")
		} else if err := checkAPIKey(ag.APIKey); err != nil {
			bad("agent.api_key", "%v", err)
		}
	case a.APIKeyFile != "":
		p, err := l.resolvePath(a.APIKeyFile, cfg.Home)
		if err != nil {
			bad("agent.api_key_file", "%v", err)
		}
		ag.APIKeyFile = p
	}
}

// Bounds of the numeric agent settings: a value outside them is a typo or
// a runaway, not a setting.
const (
	minMaxTokens       = 1
	maxMaxTokens       = 200_000
	minMaxSteps        = 1
	maxMaxSteps        = 200
	minContextBudget   = 1_000
	maxContextBudget   = 2_000_000
	minRequestTimeout  = time.Second
	maxRequestTimeout  = time.Hour
	minApprovalTimeout = 10 * time.Second
	maxApprovalTimeout = 24 * time.Hour
	minShutdownGrace   = time.Second
	maxShutdownGrace   = 10 * time.Minute
	maxInboxMaxMB      = 1 << 20 // 1 TiB
)

func applyLimitsFile(ag *AgentConfig, a *fileAgent, bad badFunc) {
	ints := []struct {
		key      string
		v        *int64
		dst      *int
		min, max int64
	}{
		{"agent.max_tokens", a.MaxTokens, &ag.MaxTokens, minMaxTokens, maxMaxTokens},
		{"agent.max_steps", a.MaxSteps, &ag.MaxSteps, minMaxSteps, maxMaxSteps},
		{"agent.context_budget", a.ContextBudget, &ag.ContextBudget, minContextBudget, maxContextBudget},
		{"agent.inbox_max_mb", a.InboxMaxMB, &ag.InboxMaxMB, 0, maxInboxMaxMB},
	}
	for _, s := range ints {
		switch {
		case s.v == nil:
		case *s.v < s.min:
			bad(s.key, "%d is less than the minimum, %d", *s.v, s.min)
		case *s.v > s.max:
			bad(s.key, "%d is more than the maximum, %d", *s.v, s.max)
		default:
			*s.dst = int(*s.v)
		}
	}
	durations := []struct {
		key, v   string
		dst      *time.Duration
		min, max time.Duration
	}{
		{"agent.request_timeout", a.RequestTimeout, &ag.RequestTimeout, minRequestTimeout, maxRequestTimeout},
		{"agent.approval_timeout", a.ApprovalTimeout, &ag.ApprovalTimeout, minApprovalTimeout, maxApprovalTimeout},
		{"agent.shutdown_grace", a.ShutdownGrace, &ag.ShutdownGrace, minShutdownGrace, maxShutdownGrace},
	}
	for _, s := range durations {
		if s.v == "" {
			continue
		}
		d, err := parseDuration(s.v, s.min, s.max)
		if err != nil {
			bad(s.key, "%v", err)
			continue
		}
		*s.dst = d
	}
}

// applyPermissionsFile overlays [agent.permissions] on the defaults. An
// empty value means the default, like an empty string anywhere else.
func applyPermissionsFile(ag *AgentConfig, perms map[string]string, bad badFunc) {
	for _, tool := range slices.Sorted(maps.Keys(perms)) {
		key := "agent.permissions." + tool
		if _, ok := ag.Permissions[tool]; !ok {
			// checkKeys has refused it already; this keeps the map from
			// ever holding a name the agent does not know.
			bad("agent.permissions", "unknown tool %s", describeUnknown(key))
			continue
		}
		switch v := perms[tool]; v {
		case "":
		case PermAllow, PermAsk, PermDeny:
			ag.Permissions[tool] = v
		default:
			bad(key, "%s is not a permission; use %q, %q or %q", quoteValue(v), PermAllow, PermAsk, PermDeny)
		}
	}
}

// parseAllow parses an entry of agent.fetch.allow: a range in CIDR notation
// or a single address, which means just that address.
func parseAllow(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("%s is not an address range such as \"192.168.1.0/24\"", quoteValue(s))
		}
		// "192.168.1.5/24" may mean the /24 or the one address; opening
		// 255 more addresses than meant is not a guess to make.
		if m := p.Masked(); p != m {
			return netip.Prefix{}, fmt.Errorf("%s has address bits beyond its /%d; write %q for the range or %q for the one address",
				quoteValue(s), p.Bits(), m, netip.PrefixFrom(p.Addr(), p.Addr().BitLen()))
		}
		return p, nil
	}
	a, err := netip.ParseAddr(s)
	switch {
	case err != nil:
		return netip.Prefix{}, fmt.Errorf("%s is not an IP address or a range such as \"192.168.1.0/24\" (host names are not accepted)",
			quoteValue(s))
	case a.Zone() != "":
		return netip.Prefix{}, fmt.Errorf("%s has a zone; write the address without it", quoteValue(s))
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// keyRun matches what looks like a piece of a key rather than a word, an
// address or a model name.
var keyRun = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`[A-Za-z0-9_+/=-]{16,}`) })

// quoteValue quotes a value for an error about a setting that takes one of
// a few words or an address. A value that looks like a key is described,
// not repeated: it may be the API key pasted on the wrong line, which is
// not known to be a secret and so is not redacted.
func quoteValue(s string) string {
	if len(s) > 64 || keyRun().MatchString(s) {
		return fmt.Sprintf("a value of %d characters (not shown)", len(s))
	}
	return fmt.Sprintf("%q", s)
}

// applyAgentEnv resolves the provider settings: the environment fallbacks,
// the API key file, and the default model. Every API key variable set is
// added to secrets, whichever provider is chosen.
func (l Loader) applyAgentEnv(cfg *Config, secrets *[]string) []error {
	for _, name := range []string{EnvAnthropicAPIKey, EnvOpenAIAPIKey} {
		if v := l.getenv(name); v != "" {
			*secrets = append(*secrets, v, strings.TrimSpace(v))
		}
	}
	ag := &cfg.Agent
	env, ok := providerEnv[ag.Provider]
	if !ok {
		ag.Model, ag.BaseURL, ag.APIKey, ag.APIKeyFile, ag.APIKeySource = "", "", "", "", ""
		return nil
	}
	ag.Model = cmp.Or(ag.Model, env.model)
	var errs []error
	if v := l.getenv(env.baseURL); ag.BaseURL == "" && v != "" {
		u, err := validateAPIURL(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", env.baseURL, err))
		}
		ag.BaseURL = u
	}
	switch {
	case ag.APIKeySource == SourceAPIKey:
		// Checked with the rest of config.toml.
	case ag.APIKeyFile != "":
		key, err := readSecretFile(ag.APIKeyFile, "agent.api_key_file", "API key file", secrets)
		if err != nil {
			errs = append(errs, err)
		} else if err := checkAPIKey(key); err != nil {
			errs = append(errs, fmt.Errorf("API key file %s: %w", ag.APIKeyFile, err))
		}
		ag.APIKey, ag.APIKeySource = key, SourceAPIKeyFile
	default:
		v := l.getenv(env.apiKey)
		if v == "" {
			break
		}
		ag.APIKey, ag.APIKeySource = strings.TrimSpace(v), env.apiKey
		if ag.APIKey == "" {
			errs = append(errs, fmt.Errorf("%s: is only whitespace", env.apiKey))
		} else if err := checkAPIKey(ag.APIKey); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", env.apiKey, err))
		}
	}
	return errs
}

// checkAPIKey refuses a key with a space, a control character or anything
// beyond ASCII: the key goes into an HTTP header, and such a character is a
// copy-and-paste mistake. Formats vary too much between providers and
// gateways for more. The value is never repeated in the error.
func checkAPIKey(key string) error {
	for i := range len(key) {
		if c := key[i]; c <= ' ' || c > '~' {
			return errors.New("has a character an API key never has " +
				"(only printable ASCII without spaces); the value is not shown")
		}
	}
	return nil
}

package config

import (
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"time"
)

// Providers, as agent.provider spells them.
const (
	ProviderNone      = "none"      // no model: latch is a remote shell (!cmd) only
	ProviderAnthropic = "anthropic" // the Messages API
	ProviderOpenAI    = "openai"    // Chat Completions: OpenAI, Ollama, vLLM, OpenRouter, …
)

// Environment variables the agent settings fall back on. They are the
// provider SDKs' own names, so they are often set globally for other tools;
// that is why config.toml wins over them (see [AgentConfig]). Only the
// selected provider's variables are read.
const (
	EnvAnthropicAPIKey  = "ANTHROPIC_API_KEY"
	EnvAnthropicBaseURL = "ANTHROPIC_BASE_URL" // API root without /v1
	EnvOpenAIAPIKey     = "OPENAI_API_KEY"
	EnvOpenAIBaseURL    = "OPENAI_BASE_URL" // API root including /v1
)

// API key sources, as reported by [AgentConfig.APIKeySource], besides the
// names of the environment variables above.
const (
	SourceAPIKey     = "agent.api_key"
	SourceAPIKeyFile = "agent.api_key_file"
)

// Defaults of the agent settings. The model's default depends on the
// provider.
const (
	DefaultProvider        = ProviderNone
	DefaultAnthropicModel  = "claude-sonnet-4-5"
	DefaultOpenAIModel     = "gpt-4o-mini"
	DefaultMaxTokens       = 4096
	DefaultMaxSteps        = 25
	DefaultRequestTimeout  = 5 * time.Minute
	DefaultContextBudget   = 100_000
	DefaultApprovalTimeout = 10 * time.Minute
	// DefaultShutdownGrace is how long a stop waits for running commands
	// and turns before it stops them.
	DefaultShutdownGrace = 20 * time.Second
	DefaultInboxMaxMB    = 1024
)

// Tool permissions, the values of [agent.permissions].
const (
	PermAllow = "allow" // the tool runs without asking
	PermAsk   = "ask"   // the chat gets Approve / Deny buttons first
	PermDeny  = "deny"  // the tool is refused; the model is told so
)

// defaultPermissions lists every tool the agent has, with its permission
// when config.toml does not set one. The tools that only look are allowed;
// every tool with a side effect on the machine, the network or the chat
// asks.
var defaultPermissions = []struct{ tool, perm string }{
	{"read_file", PermAllow},
	{"list_files", PermAllow},
	{"grep", PermAllow},
	{"write_file", PermAsk},
	{"edit_file", PermAsk},
	{"bash", PermAsk},
	{"fetch", PermAsk},
	{"send_file", PermAsk},
	{"schedule", PermAsk},
}

// DefaultPermissions returns a new map of every tool's default permission.
// Its keys are all the tool names [agent.permissions] accepts.
func DefaultPermissions() map[string]string {
	m := make(map[string]string, len(defaultPermissions))
	for _, p := range defaultPermissions {
		m[p.tool] = p.perm
	}
	return m
}

// AgentConfig configures the agent core.
//
// Provider defaults to ProviderNone: a model is used only when config.toml
// names one, never because an API key happens to be in the environment.
// With ProviderNone, Model, BaseURL, APIKey, APIKeyFile and APIKeySource are
// empty whatever config.toml says (its values are still checked), and no
// environment variable or key file is read.
//
// The API key comes from agent.api_key or agent.api_key_file (setting both
// is an error) and, only when config.toml sets neither, from the provider's
// variable (ANTHROPIC_API_KEY or OPENAI_API_KEY). That is the reverse of the
// bot token, where LATCH_TELEGRAM_TOKEN wins: the rule for both is that the
// setting meant for latch alone wins, and the SDK variables are shared with
// every other tool in the environment. The same holds for BaseURL and
// ANTHROPIC_BASE_URL / OPENAI_BASE_URL.
//
// No key is not an error: a local server may need none, and without one
// latch still works as a remote shell; the provider's client says in the
// chat that it needs a key.
type AgentConfig struct {
	Workspace   string        // absolute; default $LATCH_HOME/workspace
	BashTimeout time.Duration // default 60s; in TOML a duration string ("60s")

	Provider string // ProviderNone (default), ProviderAnthropic or ProviderOpenAI
	Model    string // default DefaultAnthropicModel or DefaultOpenAIModel
	// BaseURL is the API root without trailing slashes, or "" for the
	// provider's public API. It cannot hold a credential: a user name,
	// password or query is refused, so it is printed in full.
	BaseURL      string
	APIKey       string `json:"-"` // never serialised; see String and LogValue
	APIKeyFile   string // absolute path of agent.api_key_file, or ""
	APIKeySource string // where APIKey came from (SourceAPIKey, …), or "" if unset

	MaxTokens int // output tokens per model call; default 4096
	MaxSteps  int // model calls per message before latch stops; default 25
	// RequestTimeout is how long a model call may go without a byte from
	// the provider (an idle timeout: a reply that keeps streaming is not
	// cut off); default 5m.
	RequestTimeout time.Duration
	ContextBudget  int // approximate tokens of history kept; default 100000
	// ApprovalTimeout is how long an "ask" waits for Approve or Deny before
	// it counts as denied; default 10m.
	ApprovalTimeout time.Duration
	// ShutdownGrace is how long a stop (Ctrl-C, SIGTERM, a reload) lets
	// running commands and turns finish before it stops them; default 20s.
	ShutdownGrace time.Duration
	// InboxMaxMB caps the files sent from the chat that the workspace's
	// inbox keeps, in MiB; 0 leaves only the disk's reserve. Default 1024.
	InboxMaxMB int

	// Permissions maps every tool name to PermAllow, PermAsk or PermDeny;
	// it always holds all of them (see DefaultPermissions).
	Permissions map[string]string
	// FetchAllow lists the non-public address ranges the fetch tool may
	// reach (agent.fetch.allow); nil for none.
	FetchAllow []netip.Prefix

	// ClaudeCode and Codex configure the coding agent CLIs (config/coder.go).
	ClaudeCode ClaudeCodeConfig
	Codex      CodexConfig
}

// The providers' public APIs, where a model call goes when BaseURL is "".
// agent/provider/anthropic and agent/provider/openai use the same.
const (
	DefaultAnthropicBaseURL = "https://api.anthropic.com"
	DefaultOpenAIBaseURL    = "https://api.openai.com/v1"
)

// ModelURL is the API root model calls go to: BaseURL, or the provider's
// public API when it is ""; "" when no provider is configured.
func (a AgentConfig) ModelURL() string {
	switch {
	case a.BaseURL != "":
		return a.BaseURL
	case a.Provider == ProviderAnthropic:
		return DefaultAnthropicBaseURL
	case a.Provider == ProviderOpenAI:
		return DefaultOpenAIBaseURL
	}
	return ""
}

// String describes a without the API key, so that printing a config with %v
// or %+v cannot leak it.
func (a AgentConfig) String() string {
	return fmt.Sprintf("{Workspace:%q BashTimeout:%v Provider:%q Model:%q BaseURL:%q "+
		"APIKey:%s APIKeyFile:%q APIKeySource:%q MaxTokens:%d MaxSteps:%d RequestTimeout:%v "+
		"ContextBudget:%d ApprovalTimeout:%v ShutdownGrace:%v InboxMaxMB:%d Permissions:%v FetchAllow:%v}",
		a.Workspace, a.BashTimeout, a.Provider, a.Model, a.BaseURL,
		redactedToken(a.APIKey), a.APIKeyFile, a.APIKeySource, a.MaxTokens, a.MaxSteps, a.RequestTimeout,
		a.ContextBudget, a.ApprovalTimeout, a.ShutdownGrace, a.InboxMaxMB, a.Permissions, a.FetchAllow)
}

// GoString is String for %#v.
func (a AgentConfig) GoString() string { return "config.AgentConfig" + a.String() }

// LogValue keeps the API key out of structured logs.
func (a AgentConfig) LogValue() slog.Value {
	perms := make([]slog.Attr, 0, len(a.Permissions))
	for _, tool := range slices.Sorted(maps.Keys(a.Permissions)) {
		perms = append(perms, slog.String(tool, a.Permissions[tool]))
	}
	return slog.GroupValue(
		slog.String("workspace", a.Workspace),
		slog.Duration("bash_timeout", a.BashTimeout),
		slog.String("provider", a.Provider),
		slog.String("model", a.Model),
		slog.String("base_url", a.BaseURL),
		slog.String("api_key", redactedToken(a.APIKey)),
		slog.String("api_key_source", a.APIKeySource),
		slog.String("api_key_file", a.APIKeyFile),
		slog.Int("max_tokens", a.MaxTokens),
		slog.Int("max_steps", a.MaxSteps),
		slog.Duration("request_timeout", a.RequestTimeout),
		slog.Int("context_budget", a.ContextBudget),
		slog.Duration("approval_timeout", a.ApprovalTimeout),
		slog.Duration("shutdown_grace", a.ShutdownGrace),
		slog.Int("inbox_max_mb", a.InboxMaxMB),
		slog.Attr{Key: "permissions", Value: slog.GroupValue(perms...)},
		slog.Any("fetch_allow", a.FetchAllow),
	)
}

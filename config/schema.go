package config

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/BurntSushi/toml"
)

// fileConfig is config.toml as written. Values stay raw here; load turns
// them into a Config, so every validation message is written by us and can
// choose what it repeats back.
type fileConfig struct {
	Telegram   fileTelegram   `toml:"telegram"`
	Discord    fileDiscord    `toml:"discord"`
	Slack      fileSlack      `toml:"slack"`
	Matrix     fileMatrix     `toml:"matrix"`
	Agent      fileAgent      `toml:"agent"`
	MCP        fileMCP        `toml:"mcp"`
	Schedule   fileSchedule   `toml:"schedule"`
	Transcribe fileTranscribe `toml:"transcribe"`
}

type fileTelegram struct {
	Token       string `toml:"token"`
	TokenFile   string `toml:"token_file"`
	APIURL      string `toml:"api_url"`
	AllowGroups bool   `toml:"allow_groups"`
	Verbosity   string `toml:"verbosity"`
	// Webhook mode (see applyTelegramWebhook).
	WebhookURL    string `toml:"webhook_url"`
	WebhookListen string `toml:"webhook_listen"`
	WebhookSecret string `toml:"webhook_secret"`
}

type fileAgent struct {
	Workspace       string `toml:"workspace"`
	BashTimeout     string `toml:"bash_timeout"`
	Provider        string `toml:"provider"`
	Model           string `toml:"model"`
	BaseURL         string `toml:"base_url"`
	APIKey          string `toml:"api_key"`
	APIKeyFile      string `toml:"api_key_file"`
	MaxTokens       *int64 `toml:"max_tokens"` // nil: unset, so that 0 is refused, not defaulted
	MaxSteps        *int64 `toml:"max_steps"`
	RequestTimeout  string `toml:"request_timeout"`
	ContextBudget   *int64 `toml:"context_budget"`
	ApprovalTimeout string `toml:"approval_timeout"`
	ShutdownGrace   string `toml:"shutdown_grace"`
	InboxMaxMB      *int64 `toml:"inbox_max_mb"`
	// Permissions is keyed by tool name; checkKeys admits only the tools of
	// defaultPermissions, and checkTables that it is a table at all.
	Permissions map[string]string `toml:"permissions"`
	Fetch       fileFetch         `toml:"fetch"`
	ClaudeCode  fileClaudeCode    `toml:"claude_code"`
	Codex       fileCodex         `toml:"codex"`
}

type fileFetch struct {
	Allow []string `toml:"allow"`
}

// schemaKeys lists every key config.toml may contain, tables included, as
// toml.Key.String spells them. It must match fileConfig; a test checks.
var schemaKeys = []string{
	"telegram",
	"telegram.token",
	"telegram.token_file",
	"telegram.api_url",
	"telegram.allow_groups",
	"telegram.verbosity",
	"telegram.webhook_url",
	"telegram.webhook_listen",
	"telegram.webhook_secret",
	"discord",
	"discord.token",
	"discord.token_file",
	"discord.api_url",
	"discord.allow_groups",
	"discord.verbosity",
	"slack",
	"slack.app_token",
	"slack.app_token_file",
	"slack.bot_token",
	"slack.bot_token_file",
	"slack.api_url",
	"slack.allow_groups",
	"slack.verbosity",
	"matrix",
	"matrix.homeserver",
	"matrix.user_id",
	"matrix.access_token",
	"matrix.access_token_file",
	"matrix.device_id",
	"matrix.allow_groups",
	"matrix.verbosity",
	"agent",
	"agent.workspace",
	"agent.bash_timeout",
	"agent.provider",
	"agent.model",
	"agent.base_url",
	"agent.api_key",
	"agent.api_key_file",
	"agent.max_tokens",
	"agent.max_steps",
	"agent.request_timeout",
	"agent.context_budget",
	"agent.approval_timeout",
	"agent.shutdown_grace",
	"agent.inbox_max_mb",
	"agent.permissions",
	"agent.permissions.read_file",
	"agent.permissions.list_files",
	"agent.permissions.grep",
	"agent.permissions.write_file",
	"agent.permissions.edit_file",
	"agent.permissions.bash",
	"agent.permissions.fetch",
	"agent.permissions.send_file",
	"agent.permissions.schedule",
	"agent.fetch",
	"agent.fetch.allow",
	"agent.claude_code",
	"agent.claude_code.path",
	"agent.claude_code.model",
	"agent.claude_code.extra_args",
	"agent.claude_code.timeout",
	"agent.codex",
	"agent.codex.path",
	"agent.codex.model",
	"agent.codex.profile",
	"agent.codex.timeout",
}

// allKeys is schemaKeys with the keys of the sections kept in files of
// their own.
func allKeys() []string { return slices.Concat(schemaKeys, scheduleKeys, transcribeKeys) }

func knownKey(k string) bool {
	for _, s := range allKeys() {
		if k == s {
			return true
		}
	}
	return knownMCPKey(k)
}

// checkKeys refuses any key outside the schema. MetaData.Undecoded alone is
// not enough: the decoder matches field names case-insensitively, so
// "Token" or "[Telegram]" would be decoded yet escape checks keyed on the
// exact spelling. Here only exact spellings pass.
func checkKeys(path string, md toml.MetaData) error {
	var unknown []string
	seen := map[string]bool{}
	for _, k := range md.Keys() {
		// Report the outermost unknown part once: "[discrod]" rather than
		// every key inside it.
		for i := 1; i <= len(k); i++ {
			s := k[:i].String()
			if knownKey(s) {
				continue
			}
			if !seen[s] {
				seen[s] = true
				unknown = append(unknown, describeUnknown(s))
			}
			break
		}
	}
	switch len(unknown) {
	case 0:
		return nil
	case 1:
		return fmt.Errorf("%s: unknown key %s", path, unknown[0])
	default:
		return fmt.Errorf("%s: unknown keys %s", path, strings.Join(unknown, ", "))
	}
}

// checkTables refuses an agent.permissions that is not a table. The
// decoder leaves a map empty, without an error, when the TOML value is a
// string, a number, an array or an array of tables ([[agent.permissions]]),
// so every permission written there would silently be the default.
func checkTables(path string, md toml.MetaData) error {
	if !md.IsDefined("agent", "permissions") {
		return nil
	}
	switch t := md.Type("agent", "permissions"); t {
	case "Hash", "": // "": made implicitly by a dotted key, permissions.bash = …
		return nil
	case "ArrayHash":
		return fmt.Errorf("%s: agent.permissions: expected a table, [agent.permissions], but found an array of tables, [[agent.permissions]]", path)
	default:
		return fmt.Errorf("%s: agent.permissions: expected a table, [agent.permissions], but found %s", path, strings.ToLower(t))
	}
}

func describeUnknown(k string) string {
	// A key can be a pasted token too ("AAH…" = 1): keep long runs out.
	q := longRun().ReplaceAllString(k, "…")
	if !strings.ContainsAny(q, `"'`) {
		q = fmt.Sprintf("%q", q)
	}
	if s := suggestKey(k); s != "" {
		return fmt.Sprintf("%s (did you mean %q?)", q, s)
	}
	if strings.HasPrefix(k, "agent.permissions.") {
		return fmt.Sprintf("%s (the tools are %s)", q, strings.Join(slices.Sorted(maps.Keys(DefaultPermissions())), ", "))
	}
	return q
}

// suggestKey returns the schema key closest to k if it is a likely typo.
func suggestKey(k string) string {
	best, bestDist := "", 3
	for _, s := range allKeys() {
		if d := editDistance(strings.ToLower(k), s); d < bestDist {
			best, bestDist = s, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between two short strings.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

var (
	// quotedFragment matches what the TOML library quotes in its messages,
	// which may be a piece of the input.
	quotedFragment = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'[^']*'`) })
	// longRun matches unquoted runs that look like values (the library
	// prints out-of-range integers bare) rather than words of its prose.
	longRun    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`[A-Za-z0-9_:+-]{16,}|[0-9]{4,}`) })
	controlHex = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^0x[0-9a-f]{2}$`) })
	// tableMismatch matches the library's "type mismatch for
	// config.fileTelegram: expected table but found".
	tableMismatch = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`type mismatch for \S+: expected table but found`) })
)

// scrubTOMLMessage removes pieces of the input from a TOML library message.
// The library echoes what it failed on ("expected value but found
// \"AAH…\""), and the commonest mistake, a token pasted without quotes,
// would put the token in the error. Kept: single characters, quote marks,
// control-character codes and key names of the schema.
func scrubTOMLMessage(msg string) string {
	msg = quotedFragment().ReplaceAllStringFunc(msg, func(q string) string {
		inner := q[1 : len(q)-1]
		if utf8.RuneCountInString(inner) <= 2 || strings.Trim(inner, `"'`) == "" ||
			controlHex().MatchString(inner) || knownKey(inner) {
			return q
		}
		return q[:1] + "…" + q[len(q)-1:]
	})
	return longRun().ReplaceAllStringFunc(msg, func(run string) string {
		if keyPart(run) {
			return run
		}
		return "…"
	})
}

// keyPart reports whether s is a part of a schema key between dots, such as
// "approval_timeout", which is long enough to look like a value.
func keyPart(s string) bool {
	for _, k := range allKeys() {
		for part := range strings.SplitSeq(k, ".") {
			if part == s {
				return true
			}
		}
	}
	return false
}

// syntaxError reports a TOML syntax error by position, with the library's
// message scrubbed of input. The library's error is deliberately not
// wrapped: it may quote the input, which may be the token.
func syntaxError(path string, pe toml.ParseError) error {
	msg := fmt.Sprintf("%s: line %d, column %d: %s", path, pe.Position.Line, pe.Position.Col,
		scrubTOMLMessage(pe.Message))
	if knownKey(pe.LastKey) {
		msg += fmt.Sprintf(" (last key %q)", pe.LastKey)
	}
	if strings.HasPrefix(pe.Message, "expected value but found") ||
		strings.HasPrefix(pe.Message, "invalid datetime") {
		msg += `; text values need double quotes, as in key = "value"`
	}
	return errors.New(msg)
}

// typeError reports a value of the wrong TOML type. The library's message
// already carries the line and the key; it names types, not values, but is
// scrubbed all the same.
func typeError(path string, err error) error {
	msg := scrubTOMLMessage(strings.TrimPrefix(err.Error(), "toml: "))
	// The library names our Go type here; the user needs the TOML type.
	msg = tableMismatch().ReplaceAllString(msg, "expected a table but found")
	for _, h := range typeHints {
		if strings.Contains(msg, `"`+h.key) {
			msg += "; " + h.hint
			break
		}
	}
	return errors.New(path + ": " + msg)
}

// typeHints say what a key's value looks like, for a value of the wrong
// type. Each key is matched as the library quotes it, after its opening
// quote: the closing quote makes it one key, a final dot every key of a
// table.
var typeHints = []struct{ key, hint string }{
	{`agent.bash_timeout"`, `bash_timeout is a duration string such as "60s"`},
	{`agent.request_timeout"`, `request_timeout is a duration string such as "5m"`},
	{`agent.approval_timeout"`, `approval_timeout is a duration string such as "10m"`},
	{`agent.shutdown_grace"`, `shutdown_grace is a duration string such as "20s"`},
	{`agent.max_tokens"`, "max_tokens is a whole number such as 4096, without quotes"},
	{`agent.max_steps"`, "max_steps is a whole number such as 25, without quotes"},
	{`agent.context_budget"`, "context_budget is a whole number such as 100000, without quotes"},
	{`agent.inbox_max_mb"`, "inbox_max_mb is a whole number such as 1024, without quotes"},
	{`agent.permissions.`, `a permission is "allow", "ask" or "deny"`},
	{`agent.fetch.allow"`, `allow is a list of strings such as ["192.168.1.0/24", "10.0.0.5"]`},
}

package tools

import (
	"encoding/json"
	"regexp"
	"strings"
	"sync"
)

// The exported face of fetch's credential rules, for tools whose results
// come from elsewhere (MCP servers): the same words decide what a
// credential is, so a header fetch hides is hidden there too.

// IsCredentialHeader reports whether a header (or field) called name
// holds a secret: Authorization, Cookie, X-Api-Key, a "token" or
// "password" field, …
func IsCredentialHeader(name string) bool { return isCredentialHeader(name) }

// SecretsOf returns the values, and the tokens each is made of ("Bearer
// sk-…"), that Scrub should hide; values under 8 bytes are left out.
func SecretsOf(values ...string) []string {
	var out []string
	for _, v := range values {
		out = appendSecret(out, v)
	}
	return out
}

// Scrub replaces every occurrence of one of secrets in s with [redacted].
func Scrub(s string, secrets []string) string { return scrub(s, secrets) }

// credentialLine matches a "Name: value" or "name=value" line, as a
// header dump or an environment listing prints it.
// Compiled on first use, off the daemon's start.
var credentialLine = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?m)^([ \t"']*)([A-Za-z0-9_.-]{2,64})(["']?[ \t]*[:=][ \t]*)(\S[^\r\n]*)$`)
})

// ScrubCredentialLines hides the value of every line of s that reads as a
// credential header or variable ("Authorization: Bearer …",
// "API_TOKEN=…"): a server that dumps a request's headers or its
// environment hands the model nothing it could use.
func ScrubCredentialLines(s string) string {
	re := credentialLine()
	return re.ReplaceAllStringFunc(s, func(line string) string {
		m := re.FindStringSubmatch(line)
		if !IsCredentialHeader(m[2]) {
			return line
		}
		return m[1] + m[2] + m[3] + "[redacted]"
	})
}

// RedactJSON returns input, a JSON object, indented, with the value of
// every member whose name reads as a credential replaced by "[redacted]"
// (at any depth). Input that is not JSON is returned as it is.
func RedactJSON(input json.RawMessage) string {
	var v any
	if err := json.Unmarshal(input, &v); err != nil {
		return string(input)
	}
	b, err := json.MarshalIndent(redactValue(v), "", "  ")
	if err != nil {
		return string(input)
	}
	return string(b)
}

func redactValue(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if IsCredentialHeader(k) {
				x[k] = "[redacted]"
			} else {
				x[k] = redactValue(e)
			}
		}
	case []any:
		for i, e := range x {
			x[i] = redactValue(e)
		}
	case string:
		if looksLikeBearer(x) {
			return "[redacted]"
		}
	}
	return v
}

// looksLikeBearer reports whether s is an Authorization value.
func looksLikeBearer(s string) bool {
	l := strings.ToLower(s)
	return strings.HasPrefix(l, "bearer ") || strings.HasPrefix(l, "basic ")
}

// CutText returns at most the first n bytes of s, not splitting a rune.
func CutText(s string, n int) string { return cutText(s, n) }

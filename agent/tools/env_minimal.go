package tools

import (
	"maps"
	"os"
	"slices"
	"strings"
)

// MinimalEnv is the environment of a program latch starts for the owner
// that is not a shell command (an MCP server, a coding agent CLI): the
// variables a program needs to find its tools, its home and its locale,
// plus extra. No bot token, API key or LATCH_* variable of environ (nil:
// the daemon's) reaches it unless extra names it.
func MinimalEnv(environ []string, extra map[string]string) []string {
	if environ == nil {
		environ = os.Environ()
	}
	keep := []string{"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TMPDIR", "TERM",
		"XDG_RUNTIME_DIR", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME"}
	var env []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if _, set := extra[name]; set {
			continue
		}
		if slices.Contains(keep, name) || strings.HasPrefix(name, "LC_") {
			env = append(env, kv)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(extra)) {
		env = append(env, k+"="+extra[k])
	}
	return env
}

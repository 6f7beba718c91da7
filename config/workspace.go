package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// checkWorkspace refuses a workspace through which the agent's file tools
// would reach a secret: one that is or holds the latch home (config.toml
// with the tokens, the store, the key), or one that holds a token or key
// file. Reading is allowed without approval by default, so such a
// workspace would hand the token to a prompt-injected model, and a write
// could loosen the permissions in config.toml. The paths are compared with
// their symlinks resolved, as far as they exist.
func checkWorkspace(cfg *Config) []error {
	ws := resolveExisting(cfg.Agent.Workspace)
	var errs []error
	if within(resolveExisting(cfg.Home), ws) {
		errs = append(errs, fmt.Errorf("%s: agent.workspace: must not be or contain the latch home directory %s "+
			"(config, store and keys), which the agent's file tools would reach; use a directory of its own", cfg.Path, cfg.Home))
	}
	type file struct{ key, path string }
	var files []file
	for _, p := range Platforms {
		files = append(files, file{p.Name + ".token_file", p.Settings(cfg).TokenFile})
	}
	files = append(files, file{"agent.api_key_file", cfg.Agent.APIKeyFile},
		file{"transcribe.api_key_file", cfg.Transcribe.APIKeyFile})
	for _, f := range files {
		if f.path != "" && within(resolveExisting(f.path), ws) {
			errs = append(errs, fmt.Errorf("%s: %s: %s is inside agent.workspace, where the agent's file tools would read it; keep it outside",
				cfg.Path, f.key, f.path))
		}
	}
	return errs
}

// resolveExisting returns the absolute, clean p with the symlinks of its
// longest existing prefix resolved.
func resolveExisting(p string) string {
	p = filepath.Clean(p)
	rest := ""
	for {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Join(r, rest)
		}
		parent := filepath.Dir(p)
		if parent == p {
			return filepath.Join(p, rest)
		}
		rest = filepath.Join(filepath.Base(p), rest)
		p = parent
	}
}

// within reports whether p is dir or below it; both must be clean and
// absolute.
func within(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(os.PathSeparator))
}

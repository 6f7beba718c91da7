package doctor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/latchd/latch/config"
)

// TestScrubEveryPlatformSecret: whatever a check reports, doctor scrubs
// from it every secret of every platform, as loaded from config.toml and
// as the shell's variable has it (it used to know the Telegram token
// only).
func TestScrubEveryPlatformSecret(t *testing.T) {
	var text strings.Builder
	var values []string
	env := map[string]string{}
	for _, p := range config.Platforms {
		text.WriteString("[" + p.Name + "]\n")
		for _, s := range p.Secrets {
			v := s.Prefix + "9999platformSECRET" + p.Name + strings.ReplaceAll(s.Key, "_", "")
			text.WriteString(s.Key + " = \"" + v + "\"\n")
			values = append(values, v)
			if s.Env != "" {
				env[s.Env] = v + "shell"
				values = append(values, v+"shell")
			}
		}
	}
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, config.ConfigFile), []byte(text.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Loader{Getenv: func(string) string { return "" }}.Load(home)
	if err != nil {
		t.Fatal(err)
	}
	r := &run{d: &Doctor{Getenv: func(k string) string { return env[k] }}, cfg: cfg}
	for _, v := range values {
		if got := r.scrub("failed: " + v); strings.Contains(got, v) {
			t.Errorf("scrub leaves a platform secret: %q", got)
		}
	}
}

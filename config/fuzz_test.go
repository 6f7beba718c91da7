package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzLoad: any config.toml either loads or fails with an error; neither
// panics, and an error never repeats the token.
func FuzzLoad(f *testing.F) {
	const token = "123456:FUZZsecretTOKENvalue"
	for _, s := range []string{
		"", "[telegram]\ntoken = \"" + token + "\"\n", "[agent]\nbash_timeout = \"1s\"\n",
		"[agent.permissions]\nbash = \"allow\"\n", "[agent.fetch]\nallow = [\"10.0.0.0/8\"]\n",
		"[telegram]\napi_url = \"http://" + token + "@x\"\n", "token = " + token, "[[agent]]",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, content string) {
		home := t.TempDir()
		if err := os.WriteFile(filepath.Join(home, ConfigFile), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Loader{Getenv: func(string) string { return "" }}.Load(home)
		if err != nil && strings.Contains(err.Error(), "FUZZsecretTOKENvalue") {
			t.Fatalf("error repeats the token: %v", err)
		}
	})
}

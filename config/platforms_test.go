package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTokenFileErrorNamesItsSection: every platform's token file, when it
// cannot be read, is named by its own section's key (Discord's was named
// telegram.token_file).
func TestTokenFileErrorNamesItsSection(t *testing.T) {
	for _, p := range Platforms {
		t.Run(p.Name, func(t *testing.T) {
			home := t.TempDir()
			text := "[" + p.Name + "]\ntoken_file = \"missing.token\"\n"
			if err := os.WriteFile(filepath.Join(home, ConfigFile), []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := testLoader(t, nil).Load(home)
			if err == nil || !strings.Contains(err.Error(), p.Name+".token_file") {
				t.Fatalf("Load = %v; want an error naming %s.token_file", err, p.Name)
			}
			for _, other := range Platforms {
				if other.Name != p.Name && strings.Contains(err.Error(), other.Name+".") {
					t.Errorf("the error names %s's section: %v", other.Name, err)
				}
			}
		})
	}
}

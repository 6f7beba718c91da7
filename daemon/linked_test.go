package daemon

import (
	"errors"
	"strings"
	"testing"

	"github.com/latchd/latch/config"
)

// TestCheckLinked: a daemon asked to run an enabled platform whose
// adapter its binary does not link (Matrix in latch) refuses with
// ErrConfig, naming the binary that links it; a platform that is not
// configured, or is linked, is no obstacle.
func TestCheckLinked(t *testing.T) {
	table := make([]Platform, len(Platforms))
	copy(table, Platforms)
	for i := range table {
		if table[i].Name == "matrix" {
			table[i].New = nil
		}
	}
	cfg := &config.Config{}
	if err := checkLinked(table, cfg); err != nil {
		t.Fatalf("no [matrix]: %v", err)
	}
	cfg.Matrix.Token = "syt_secret"
	err := checkLinked(table, cfg)
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "latch-matrix") || strings.Contains(err.Error(), "syt_secret") {
		t.Fatalf("unlinked [matrix]: %v", err)
	}
	if err := checkLinked(Platforms, cfg); err != nil {
		t.Fatalf("linked [matrix] (the tests link it): %v", err)
	}
}

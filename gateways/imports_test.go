package gateways_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/latchd/latch/"

// TestAdaptersDoNotImportTheCore: an adapter (gateways/<platform> and the
// packages under it, its fake included) reaches the agent's events through
// the leaf package turn and the Hub through Sink, never agent, store or
// pairing directly; and turn imports nothing of latch.
func TestAdaptersDoNotImportTheCore(t *testing.T) {
	forbidden := []string{module + "agent", module + "store", module + "pairing"}
	for _, platform := range []string{"telegram", "discord", "slack"} {
		for _, im := range imports(t, platform) {
			for _, f := range forbidden {
				if im.path == f || strings.HasPrefix(im.path, f+"/") {
					t.Errorf("%s imports %s: an adapter must not compile against the core", im.file, im.path)
				}
			}
		}
	}
	n := 0
	for _, im := range imports(t, "../turn") {
		n++
		if strings.HasPrefix(im.path, module) {
			t.Errorf("%s imports %s: package turn is a leaf", im.file, im.path)
		}
	}
	if n == 0 {
		t.Fatal("found no imports in ../turn: the walk is broken")
	}
}

type importOf struct{ file, path string }

// imports lists the imports of the Go files under dir, tests left out
// (they may build a Hub).
func imports(t *testing.T, dir string) []importOf {
	t.Helper()
	var out []importOf
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, s := range f.Imports {
			p, _ := strconv.Unquote(s.Path.Value)
			out = append(out, importOf{path, p})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

package gateways_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/latchd/latch/"

// TestAdaptersDoNotImportTheCore: an adapter (each gateways/<platform>
// and the packages under it, its fake included) compiles against neither
// the agent core, the store, pairing, config nor the Hub: not directly and
// not through anything it imports. It reaches the Hub through
// gateways/adapter (Sink, Gateway, Message) and the agent's events through
// the leaf package turn, which import nothing of latch but turn.
func TestAdaptersDoNotImportTheCore(t *testing.T) {
	forbidden := []string{module + "agent", module + "store", module + "pairing", module + "config", module + "gateways"}
	platforms, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, d := range platforms {
		switch name := d.Name(); {
		case !d.IsDir(), name == "internal", name == "adapter", name == "gatewaytest":
			continue
		}
		n++
		for _, im := range closure(t, d.Name()) {
			for _, f := range forbidden {
				if im.path == f || strings.HasPrefix(im.path, f+"/") && !allowedUnder(im.path) {
					t.Errorf("%s imports %s: an adapter must not compile against the core", im.file, im.path)
				}
			}
		}
	}
	if n < 2 {
		t.Fatalf("found %d adapters under gateways/: the walk is broken", n)
	}
	for _, leaf := range []string{"../turn", "adapter"} {
		k := 0
		for _, im := range imports(t, leaf) {
			k++
			if strings.HasPrefix(im.path, module) && im.path != module+"turn" {
				t.Errorf("%s imports %s: package %s is a leaf", im.file, im.path, leaf)
			}
		}
		if k == 0 {
			t.Fatalf("found no imports in %s: the walk is broken", leaf)
		}
	}
}

// allowedUnder reports whether path, below gateways/, is one an adapter
// may use: the leaf adapter package, the adapters' shared internals and
// the adapters themselves.
func allowedUnder(path string) bool {
	rest, ok := strings.CutPrefix(path, module+"gateways/")
	return ok && rest != "gatewaytest" && !strings.HasPrefix(rest, "gatewaytest/")
}

// closure lists the imports of the packages under dir and, transitively,
// of every package of this module they import (tests left out).
func closure(t *testing.T, dir string) []importOf {
	t.Helper()
	var out []importOf
	seen := map[string]bool{}
	todo := []string{dir}
	for len(todo) > 0 {
		d := todo[0]
		todo = todo[1:]
		for _, im := range imports(t, d) {
			out = append(out, im)
			rel, ok := strings.CutPrefix(im.path, module)
			if !ok || seen[rel] {
				continue
			}
			seen[rel] = true
			todo = append(todo, filepath.Join("..", rel))
		}
	}
	return out
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

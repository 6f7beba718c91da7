package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/latchd/latch/config"
)

func TestSymbolPackage(t *testing.T) {
	for sym, want := range map[string]string{
		"github.com/bwmarrin/discordgo.(*Session).Open": "github.com/bwmarrin/discordgo",
		"runtime.mallocgc": "runtime",
		"vendor/golang.org/x/net/http2/hpack.(*Decoder).Write":   "vendor/golang.org/x/net/http2/hpack",
		"slices.SortFunc[go.shape.*github.com/a/b.T]":            "slices",
		"go.etcd.io/bbolt.(*Tx).Commit":                          "go.etcd.io/bbolt",
		"github.com/latchd/latch/gateways/telegram.New.func1":    "github.com/latchd/latch/gateways/telegram",
		"type:.eq.github.com/latchd/latch/control.Status":        "github.com/latchd/latch/control",
		"encoding/json.(*decodeState).object":                    "encoding/json",
		"github.com/yuin/goldmark/parser.NewParser":              "github.com/yuin/goldmark/parser",
		"internal/runtime/atomic.(*Uint32).Load":                 "internal/runtime/atomic",
		"crypto/internal/fips140/nistec.(*P256Point).ScalarMult": "crypto/internal/fips140/nistec",
	} {
		if got := symbolPackage(sym); got != want {
			t.Errorf("symbolPackage(%q) = %q, want %q", sym, got, want)
		}
	}
}

// The table lands between the markers and nothing else of the file changes;
// a file without markers gets them appended, a missing one is created.
func TestWriteCosts(t *testing.T) {
	dir := t.TempDir()
	table := costsBegin + "\nnew table\n" + costsEnd + "\n"
	for _, tc := range []struct{ name, before, after string }{
		{"replaces between markers", "# bench\n\nintro\n\n" + costsBegin + "\nold\n" + costsEnd + "\n\nafter\n",
			"# bench\n\nintro\n\n" + table + "\nafter\n"},
		{"appends when unmarked", "# bench\n\nintro\n", "# bench\n\nintro\n\n## What each dependency and each gateway costs\n\n" + table},
		{"creates", "", "# bench\n\n## What each dependency and each gateway costs\n\n" + table},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".md")
			if tc.before != "" {
				if err := os.WriteFile(path, []byte(tc.before), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := writeCosts(path, table); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.after {
				t.Errorf("file is\n%s\nwant\n%s", got, tc.after)
			}
		})
	}
}

// Every platform of config.Platforms has a row of the cost table, measured
// or said not to be: a new platform shows there without editing bench.
func TestCostsTableHasEveryPlatform(t *testing.T) {
	r := runResult{Floor: floorResult{Idle: memory{RSS: 7000}}, Idle: memory{RSS: 9000}, AllIdle: memory{RSS: 11000},
		With: map[string]memory{config.TelegramPlatform.Name: {RSS: 8000}}}
	for name := range platformFakes {
		r.With[name] = memory{RSS: 10000}
	}
	table := costsTable(meta{}, nil, 1, []runResult{r})
	for _, p := range config.Platforms {
		if !strings.Contains(table, "| Telegram and "+p.Title+" |") && !strings.Contains(table, "| "+p.Title+" | not measured") &&
			p.Name != config.TelegramPlatform.Name {
			t.Errorf("no row for %s in\n%s", p.Title, table)
		}
	}
}

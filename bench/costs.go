package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/latchd/latch/config"
)

// Markers around the cost table in bench/README.md, which -costs rewrites.
const (
	costsBegin = "<!-- costs:begin -->"
	costsEnd   = "<!-- costs:end -->"
)

// moduleCode is the machine code one module puts in the binary.
type moduleCode struct {
	Module string `json:"module"`
	Bytes  int64  `json:"text_bytes"`
}

// codeByModule builds ./cmd/latch-matrix (latch with the Matrix adapter:
// every module latch can run) with its symbol table and adds up the
// sizes of its functions (go tool nm, text symbols) by the module of their
// package: the standard library, latch, each dependency. The binary's
// other parts (function table, type data, strings) are shared data the
// linker does not name by package, so they are left out.
func codeByModule(ctx context.Context, dir string) ([]moduleCode, int64, error) {
	root, err := moduleRoot(ctx)
	if err != nil {
		return nil, 0, err
	}
	bin, err := goBuild(ctx, filepath.Join(dir, "latch-symbols"), "./cmd/latch-matrix", "-w")
	if err != nil {
		return nil, 0, err
	}
	list := exec.CommandContext(ctx, "go", "list", "-deps", "-f", "{{.ImportPath}} {{with .Module}}{{.Path}}{{end}}", "./cmd/latch-matrix")
	list.Dir, list.Env = root, append(os.Environ(), "CGO_ENABLED=0")
	pkgs, err := list.Output()
	if err != nil {
		return nil, 0, fmt.Errorf("go list -deps: %w", err)
	}
	moduleOf := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(pkgs)), "\n") {
		pkg, m, _ := strings.Cut(line, " ")
		if m == "" {
			m = "std"
		}
		moduleOf[pkg] = m
	}
	nm, err := exec.CommandContext(ctx, "go", "tool", "nm", "-size", bin).Output()
	if err != nil {
		return nil, 0, fmt.Errorf("go tool nm: %w", err)
	}
	sizes, total := map[string]int64{}, int64(0)
	sc := bufio.NewScanner(bytes.NewReader(nm))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || (f[2] != "T" && f[2] != "t") {
			continue
		}
		n, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue
		}
		m, ok := moduleOf[symbolPackage(strings.Join(f[3:], " "))]
		if !ok {
			m = "generated, no package"
		}
		sizes[m] += n
		total += n
	}
	var rows []moduleCode
	for m, n := range sizes {
		rows = append(rows, moduleCode{m, n})
	}
	slices.SortFunc(rows, func(a, b moduleCode) int { return int(b.Bytes - a.Bytes) })
	return rows, total, nil
}

// symbolPackage is the import path of a Go symbol's package:
// "github.com/a/b.(*T).M" → "github.com/a/b", "vendor/golang.org/x/net/
// http2.f" → the vendored path as go list names it.
func symbolPackage(sym string) string {
	// The compiler's equality functions are named after their type.
	sym = strings.TrimPrefix(sym, "type:.eq.")
	if i := strings.IndexAny(sym, "[("); i >= 0 {
		sym = sym[:i]
	}
	slash := strings.LastIndexByte(sym, '/')
	dot := strings.IndexByte(sym[slash+1:], '.')
	if dot < 0 {
		return sym
	}
	return sym[:slash+1+dot]
}

// costsTable renders what each dependency and each gateway costs, from a
// bench run: code by module, and idle RSS of the floor bot, of Telegram
// alone, of Telegram and each other platform, and of all of them at once,
// as medians over the runs. The gateways are config.Platforms' rows.
func costsTable(m meta, code []moduleCode, total int64, runs []runResult) string {
	med := func(f func(runResult) float64) float64 {
		var xs []float64
		for _, r := range runs {
			xs = append(xs, f(r))
		}
		return median(xs)
	}
	floor := med(func(r runResult) float64 { return mb(r.Floor.Idle.RSS) })
	tg := med(func(r runResult) float64 { return mb(r.Idle.RSS) })
	all := med(func(r runResult) float64 { return mb(r.AllIdle.RSS) })
	ps, missing := extraPlatforms()
	var b strings.Builder
	fmt.Fprintln(&b, costsBegin)
	fmt.Fprintf(&b, "Written by `go run ./bench -costs` on %s (%s, %s, kernel %s, %d run(s)%s); do not edit by hand.\n\n",
		m.Date, m.Source, m.Go, m.Kernel, m.Runs, map[bool]string{true: ", -quick"}[m.Quick])
	fmt.Fprintln(&b, "| gateway | idle RSS | ÷ floor bot | what it adds |")
	fmt.Fprintln(&b, "|---|---|---|---|")
	fmt.Fprintf(&b, "| floor bot (bench/floor) | %.2f MB | 1.00× | |\n", floor)
	fmt.Fprintf(&b, "| Telegram only, just paired (the idle row of the bench) | %.2f MB | %.2f× | %+.2f MB over the floor |\n", tg, tg/floor, tg-floor)
	// The gateway rows compare daemons restarted latched, as AllIdle is.
	tg = med(func(r runResult) float64 { return mb(r.With[config.TelegramPlatform.Name].RSS) })
	fmt.Fprintf(&b, "| Telegram only, restarted latched | %.2f MB | %.2f× | %+.2f MB over the floor |\n", tg, tg/floor, tg-floor)
	for _, p := range ps {
		with := all
		if len(ps) > 1 {
			with = med(func(r runResult) float64 { return mb(r.With[p.Name].RSS) })
		}
		fmt.Fprintf(&b, "| Telegram and %s | %.2f MB | %.2f× | %s: %+.2f MB |\n", p.Title, with, with/floor, p.Title, with-tg)
	}
	if len(ps) > 1 {
		fmt.Fprintf(&b, "| %s | %.2f MB | %.2f× | %+.2f MB over Telegram only |\n", withTelegram(ps), all, all/floor, all-tg)
	}
	for _, title := range missing {
		fmt.Fprintf(&b, "| %s | not measured | | no fake for it in bench/platforms.go |\n", title)
	}
	fmt.Fprintln(&b)
	fmt.Fprintf(&b, "Machine code by module (`go tool nm -size`, text symbols; %.2f MB in all, of a %.1f MB release binary):\n\n",
		float64(total)/1e6, float64(m.BinaryBytes)/1e6)
	fmt.Fprintln(&b, "| module | code | share |")
	fmt.Fprintln(&b, "|---|---|---|")
	for _, c := range code {
		fmt.Fprintf(&b, "| %s | %.0f KB | %.1f %% |\n", c.Module, float64(c.Bytes)/1e3, 100*float64(c.Bytes)/float64(total))
	}
	fmt.Fprintln(&b, costsEnd)
	return b.String()
}

// writeCosts puts table between the markers of path, creating the file
// (or appending the markers) if it has none.
func writeCosts(path, table string) error {
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	s := string(old)
	i, j := strings.Index(s, costsBegin), strings.Index(s, costsEnd)
	switch {
	case i >= 0 && j > i:
		s = s[:i] + table + strings.TrimPrefix(s[j+len(costsEnd):], "\n")
	case len(s) == 0:
		s = "# bench\n\n## What each dependency and each gateway costs\n\n" + table
	default:
		s = strings.TrimRight(s, "\n") + "\n\n## What each dependency and each gateway costs\n\n" + table
	}
	return os.WriteFile(path, []byte(s), 0o644)
}

// refreshCosts measures code by module and writes the cost table of runs
// into the module's bench/README.md.
func refreshCosts(ctx context.Context, m meta, dir string, runs []runResult) error {
	code, total, err := codeByModule(ctx, dir)
	if err != nil {
		return err
	}
	root, err := moduleRoot(ctx)
	if err != nil {
		return err
	}
	return writeCosts(filepath.Join(root, "bench", "README.md"), costsTable(m, code, total, runs))
}

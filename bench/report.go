package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
)

// meta describes where and how the numbers were taken.
type meta struct {
	Date        string        `json:"date"`
	Go          string        `json:"go"`
	Platform    string        `json:"platform"`
	CPUs        int           `json:"cpus"`
	CPUModel    string        `json:"cpu_model"`
	Kernel      string        `json:"kernel"`
	Source      string        `json:"source"` // what was measured: a commit, or -bin's path
	HomeFS      string        `json:"home_fs"`
	Commit      time.Duration `json:"commit_floor_p50_ns"`
	BinaryBytes int64         `json:"binary_bytes"`
	Runs        int           `json:"runs"`
	Quick       bool          `json:"quick"`
	Args        []string      `json:"args"`
}

func newMeta(o options, bin, root string) (meta, error) {
	fi, err := os.Stat(bin)
	if err != nil {
		return meta{}, err
	}
	commit, err := commitFloor(root, 50)
	if err != nil {
		return meta{}, fmt.Errorf("fdatasync probe: %w", err)
	}
	var u syscall.Utsname
	_ = syscall.Uname(&u)
	return meta{
		Date: time.Now().UTC().Format(time.DateOnly), Go: runtime.Version(),
		Platform: runtime.GOOS + "/" + runtime.GOARCH, CPUs: runtime.NumCPU(), CPUModel: cpuModel(),
		Kernel: cstring(u.Release[:]), HomeFS: fsName(root), Commit: commit,
		BinaryBytes: fi.Size(), Runs: o.runs, Quick: o.quick, Args: os.Args[1:], Source: source(o),
	}, nil
}

// source names what was measured: the binary given with -bin, or the
// commit of the working tree that was built (+dirty when it has changes).
func source(o options) string {
	if o.bin != "" {
		return o.bin
	}
	out, err := exec.Command("git", "describe", "--always", "--dirty=+dirty", "--exclude=*").Output()
	if err != nil {
		return "unknown commit"
	}
	return "commit " + strings.TrimSpace(string(out))
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func cstring(b []int8) string {
	var s strings.Builder
	for _, c := range b {
		if c == 0 {
			break
		}
		s.WriteByte(byte(c))
	}
	return s.String()
}

// row is one line of the table: a value per run (or per sample where the
// note says so), summarised by median and range.
type row struct {
	Name    string    `json:"name"`
	Unit    string    `json:"unit"`
	Values  []float64 `json:"values"`
	Median  float64   `json:"median"`
	Min     float64   `json:"min"`
	Max     float64   `json:"max"`
	Budget  string    `json:"budget,omitempty"`
	Verdict string    `json:"verdict,omitempty"` // PASS or MISS
	Note    string    `json:"note,omitempty"`
}

// budget judges a row's median.
type budget struct {
	text string
	ok   func(float64) bool
}

func atMost(limit float64, text string) *budget {
	return &budget{text: text, ok: func(v float64) bool { return v <= limit }}
}

func atLeast(limit float64, text string) *budget {
	return &budget{text: text, ok: func(v float64) bool { return v >= limit }}
}

func newRow(name, unit string, vals []float64, b *budget, note string) row {
	r := row{Name: name, Unit: unit, Values: vals, Median: median(vals), Note: note}
	if len(vals) > 0 {
		r.Min, r.Max = slices.Min(vals), slices.Max(vals)
	}
	if b != nil {
		r.Budget, r.Verdict = b.text, "MISS"
		if b.ok(r.Median) {
			r.Verdict = "PASS"
		}
	}
	return r
}

type report struct {
	Meta   meta         `json:"meta"`
	Rows   []row        `json:"rows"`
	Runs   []runResult  `json:"runs"`
	Memory *turnsResult `json:"memory_run,omitempty"`
}

func (rep report) writeJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

func (rep report) writeTable(w io.Writer) error {
	m := rep.Meta
	fmt.Fprintf(w, "latch bench · %s · %s · %s %s · %d CPUs (%s) · kernel %s\n", m.Date, m.Source, m.Go, m.Platform, m.CPUs, m.CPUModel, m.Kernel)
	fmt.Fprintf(w, "LATCH_HOME on %s (commit floor, 2× write+fdatasync, p50 %s ms) · %d run(s)%s · median of runs, range = min–max over runs\n\n",
		m.HomeFS, fmtValue("ms", ms(m.Commit)), m.Runs, map[bool]string{true: " · -quick"}[m.Quick])
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "metric\tmedian\trange\tbudget\t\tnote")
	pass, miss := 0, 0
	for _, r := range rep.Rows {
		rng := ""
		if len(r.Values) > 1 {
			rng = fmtValue(r.Unit, r.Min) + " – " + fmtValue(r.Unit, r.Max)
		}
		fmt.Fprintf(tw, "%s\t%s %s\t%s\t%s\t%s\t%s\n", r.Name, fmtValue(r.Unit, r.Median), r.Unit, rng, r.Budget, r.Verdict, r.Note)
		switch r.Verdict {
		case "PASS":
			pass++
		case "MISS":
			miss++
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\nbudgets: %d PASS, %d MISS\n", pass, miss)
	return err
}

func fmtValue(unit string, v float64) string {
	switch {
	case unit == "msg/s" || unit == "%" || unit == "turns":
		return fmt.Sprintf("%.0f", v)
	case v != 0 && (v < 10 && v > -10):
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.1f", v)
	}
}

package service

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// goldenUnits are the variants kept in testdata/<name>.service.
var goldenUnits = map[string]UnitOptions{
	"user": {
		ExecPath: "/usr/local/bin/latch", Home: "/home/alice/.latch",
		SearchPath: "/home/alice/.local/bin:/home/alice/go/bin:/usr/local/bin:/usr/bin:/bin",
	},
	"system": {
		ExecPath: "/usr/local/bin/latch", Home: "/home/alice/.latch",
		System: true, User: "alice",
	},
	"user-hardened": {ExecPath: "/usr/local/bin/latch", Home: "/home/alice/.latch", Harden: true},
	"system-hardened": {
		ExecPath: "/usr/local/bin/latch", Home: "/home/alice/.latch",
		System: true, User: "alice", Harden: true,
	},
	"odd-paths": {
		ExecPath: "/opt/my latch/100%h/latch", Home: `/home/a b/50% "off"/it's\.latch`,
		SearchPath:    `/opt/my tools/bin:/home/a b/100%h/bin:/srv/"q"/it's\bin:/usr/bin`,
		ShutdownGrace: 1500 * time.Millisecond,
	},
}

func TestUnitGolden(t *testing.T) {
	for name, opts := range goldenUnits {
		t.Run(name, func(t *testing.T) {
			got, err := Unit(opts)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", name+".service")
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./service -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("Unit(%+v) differs from %s (go test ./service -update rewrites it):\n%s",
					opts, path, lineDiff(string(want), got))
			}
		})
	}
}

// TestUnitSettings pins the settings the issue asks for, so a golden file
// rewritten with -update cannot quietly drop one.
func TestUnitSettings(t *testing.T) {
	hardening := []string{
		"NoNewPrivileges=yes", "PrivateTmp=yes", "ProtectSystem=full",
		"ProtectKernelModules=yes", "ProtectKernelTunables=yes", "ProtectControlGroups=yes", "RestrictSUIDSGID=yes", "LockPersonality=yes",
	}
	common := []string{
		"After=network-online.target", "Wants=network-online.target",
		"Type=notify", "NotifyAccess=main", "ExecStart=/usr/local/bin/latch run",
		"Environment=LATCH_HOME=/home/alice/.latch", "Restart=on-failure",
		"RestartSec=5s", "RestartPreventExitStatus=78", "WatchdogSec=30", "ExecReload=kill -HUP $MAINPID",
		"TimeoutStopSec=30s", "KillMode=mixed", "Delegate=yes",
	}
	tests := []struct {
		name       string
		want, deny []string
	}{
		{"user", append(common, "WantedBy=default.target",
			"Environment=PATH=/home/alice/.local/bin:/home/alice/go/bin:/usr/local/bin:/usr/bin:/bin"),
			append(hardening, "User=", "PrivateUsers=", "ProtectHome=")},
		{"system", append(common, "User=alice", "WantedBy=multi-user.target"),
			append(hardening, "PrivateUsers=", "ProtectHome=", "default.target")},
		{"user-hardened", append(append(common, hardening...), "PrivateUsers=yes", "WantedBy=default.target",
			"ReadWritePaths=-/sys/fs/cgroup/user.slice/user-%U.slice/user@%U.service/app.slice/latch.service",
			"ReadWritePaths=-/sys/fs/cgroup/unified/user.slice/user-%U.slice/user@%U.service/app.slice/latch.service"),
			[]string{"User=", "ProtectHome=", "ReadWritePaths=/sys/fs/cgroup"}},
		{"system-hardened", append(append(common, hardening...), "User=alice", "WantedBy=multi-user.target",
			"ReadWritePaths=-/sys/fs/cgroup/system.slice/latch.service", "ReadWritePaths=-/sys/fs/cgroup/unified/system.slice/latch.service"),
			[]string{"PrivateUsers=", "ProtectHome=", "ReadWritePaths=/sys/fs/cgroup"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			unit, err := Unit(goldenUnits[tt.name])
			if err != nil {
				t.Fatal(err)
			}
			lines := settingLines(unit)
			for _, w := range tt.want {
				if !lines[w] {
					t.Errorf("missing line %q in\n%s", w, unit)
				}
			}
			for l := range lines {
				for _, d := range tt.deny {
					if strings.HasPrefix(l, d) {
						t.Errorf("unexpected line %q", l)
					}
				}
			}
		})
	}
}

func TestUnitHardenedExplainsTradeoff(t *testing.T) {
	unit, err := Unit(goldenUnits["system-hardened"])
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# - The agent can no longer use sudo", "# - /usr, /boot and /etc are read-only", "# ProtectHome is deliberately not set"} {
		if !strings.Contains(unit, want) {
			t.Errorf("hardened unit lacks the comment %q", want)
		}
	}
}

func TestUnitRefuses(t *testing.T) {
	ok := UnitOptions{ExecPath: "/usr/bin/latch", Home: "/home/a/.latch"}
	tests := []struct {
		name string
		edit func(*UnitOptions)
		want string
	}{
		{"empty exec path", func(o *UnitOptions) { o.ExecPath = "" }, "empty"},
		{"relative exec path", func(o *UnitOptions) { o.ExecPath = "bin/latch" }, "not absolute"},
		{"exec path with $", func(o *UnitOptions) { o.ExecPath = "/opt/${X}/latch" }, "contains $"},
		{"exec path with a quote", func(o *UnitOptions) { o.ExecPath = "/opt/it's/latch" }, "contains '"},
		{"exec path with a double quote", func(o *UnitOptions) { o.ExecPath = `/opt/"x"/latch` }, `contains "`},
		{"exec path with a backslash", func(o *UnitOptions) { o.ExecPath = `/opt/x\y/latch` }, `contains \`},
		{"exec path with newline", func(o *UnitOptions) { o.ExecPath = "/opt/a\nExecStartPre=/bin/evil" }, "control character"},
		{"relative home", func(o *UnitOptions) { o.Home = ".latch" }, "not absolute"},
		{"home with newline", func(o *UnitOptions) { o.Home = "/home/a\n[Install]" }, "control character"},
		{"home not UTF-8", func(o *UnitOptions) { o.Home = "/home/\xff" }, "UTF-8"},
		{"system without user", func(o *UnitOptions) { o.System = true }, "--user NAME"},
		{"user without system", func(o *UnitOptions) { o.User = "alice" }, "only for a system unit"},
		{"user with a space", func(o *UnitOptions) { o.System, o.User = true, "al ice" }, "not a valid user name"},
		{"user with a specifier", func(o *UnitOptions) { o.System, o.User = true, "%u" }, "not a valid user name"},
		{"user starting with -", func(o *UnitOptions) { o.System, o.User = true, "-alice" }, "not a valid user name"},
		{"negative grace", func(o *UnitOptions) { o.ShutdownGrace = -time.Second }, "negative"},
		{"PATH with an empty entry", func(o *UnitOptions) { o.SearchPath = "/usr/bin::/bin" }, "empty entry"},
		{"PATH ending in :", func(o *UnitOptions) { o.SearchPath = "/usr/bin:" }, "empty entry"},
		{"PATH with a relative entry", func(o *UnitOptions) { o.SearchPath = "/usr/bin:bin" }, "not absolute"},
		{"PATH with .", func(o *UnitOptions) { o.SearchPath = ".:/usr/bin" }, "not absolute"},
		{"PATH with newline", func(o *UnitOptions) { o.SearchPath = "/usr/bin\nExecStartPre=/bin/evil" }, "control character"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := ok
			tt.edit(&opts)
			unit, err := Unit(opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Unit(%+v) = error %v, want one containing %q; unit:\n%s", opts, err, tt.want, unit)
			}
		})
	}
}

func TestUnitTimeoutStop(t *testing.T) {
	tests := []struct {
		grace time.Duration
		want  string
	}{
		{0, "TimeoutStopSec=30s"},
		{20 * time.Second, "TimeoutStopSec=30s"},
		{1500 * time.Millisecond, "TimeoutStopSec=12s"},
		{2 * time.Minute, "TimeoutStopSec=130s"},
	}
	for _, tt := range tests {
		unit, err := Unit(UnitOptions{ExecPath: "/bin/latch", ShutdownGrace: tt.grace})
		if err != nil {
			t.Fatal(err)
		}
		if !settingLines(unit)[tt.want] {
			t.Errorf("grace %s: no line %q in\n%s", tt.grace, tt.want, unit)
		}
	}
}

func TestUnitWithoutHomeLeavesEnvironmentUnset(t *testing.T) {
	unit, err := Unit(UnitOptions{ExecPath: "/bin/latch"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(unit, "Environment=") {
		t.Errorf("unit sets an environment without a home:\n%s", unit)
	}
}

// TestUnitEscaping checks that a path survives systemd's reading of the
// rendered word: quotes, C escapes, then %-specifiers. systemdWord below
// follows systemd's extract_first_word(EXTRACT_UNQUOTE|EXTRACT_CUNESCAPE)
// and specifier expansion; TestUnitVerify checks the same paths against
// systemd itself.
func TestUnitEscaping(t *testing.T) {
	tests := []struct {
		home, wantLine string
	}{
		{"/home/alice/.latch", `Environment=LATCH_HOME=/home/alice/.latch`},
		{"/home/a b/.latch", `Environment="LATCH_HOME=/home/a b/.latch"`},
		{"/home/100%h/.latch", `Environment=LATCH_HOME=/home/100%%h/.latch`},
		{"/home/50% off/.latch", `Environment="LATCH_HOME=/home/50%% off/.latch"`},
		{`/home/x"y\z`, `Environment="LATCH_HOME=/home/x\"y\\z"`},
		{"/home/it's", `Environment="LATCH_HOME=/home/it's"`},
		// An escaped backslash at the end of a line is not a continuation.
		{`/home/x\`, `Environment=LATCH_HOME=/home/x\\`},
	}
	for _, tt := range tests {
		t.Run(tt.home, func(t *testing.T) {
			// Only the home may hold quotes and backslashes: systemd refuses
			// them in an executable path.
			execPath := strings.NewReplacer(`"`, "", "'", "", `\`, "").Replace(tt.home) + "/bin/latch"
			unit, err := Unit(UnitOptions{ExecPath: execPath, Home: tt.home})
			if err != nil {
				t.Fatal(err)
			}
			lines := settingLines(unit)
			if !lines[tt.wantLine] {
				t.Errorf("no line %s in\n%s", tt.wantLine, unit)
			}
			env := settingValue(unit, "Environment")
			if got, err := systemdWord(env); err != nil || got != "LATCH_HOME="+tt.home {
				t.Errorf("systemd reads Environment=%s as %q, %v; want %q", env, got, err, "LATCH_HOME="+tt.home)
			}
			exec := strings.TrimSuffix(settingValue(unit, "ExecStart"), " run")
			if got, err := systemdWord(exec); err != nil || got != execPath {
				t.Errorf("systemd reads ExecStart=%s as %q, %v; want %q", exec, got, err, execPath)
			}
		})
	}
}

// TestUnitSearchPath: the PATH survives systemd's reading of the word, and
// no PATH leaves the manager's default.
func TestUnitSearchPath(t *testing.T) {
	for _, p := range []string{
		"/home/alice/.local/bin:/usr/bin",
		"/opt/my tools/bin:/usr/bin",
		`/home/100%h/bin:/srv/"q"/it's\bin:/srv/$HOME/bin`,
	} {
		unit, err := Unit(UnitOptions{ExecPath: "/usr/bin/latch", Home: "/home/a/.latch", SearchPath: p})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for l := range strings.SplitSeq(unit, "\n") {
			if v, ok := strings.CutPrefix(l, "Environment="); ok {
				w, err := systemdWord(v)
				if err != nil {
					t.Errorf("Environment=%s: %v", v, err)
				}
				got = append(got, w)
			}
		}
		if want := []string{"LATCH_HOME=/home/a/.latch", "PATH=" + p}; !slices.Equal(got, want) {
			t.Errorf("SearchPath %q: systemd reads the environment as %q, want %q", p, got, want)
		}
	}
	unit, err := Unit(UnitOptions{ExecPath: "/usr/bin/latch"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(unit, "PATH=") {
		t.Errorf("unit sets PATH without a SearchPath:\n%s", unit)
	}
}

// systemdWord reads s the way systemd reads one word of ExecStart= or
// Environment=, and fails if s is not exactly one word or has a specifier
// other than %%.
func systemdWord(s string) (string, error) {
	var b strings.Builder
	var quote rune
	i := 0
	for ; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\':
			i++
			if i == len(s) {
				return "", errors.New("trailing backslash")
			}
			esc, ok := map[byte]byte{'\\': '\\', '"': '"', '\'': '\'', 'n': '\n', 't': '\t', 's': ' '}[s[i]]
			if !ok {
				return "", fmt.Errorf("escape \\%c", s[i])
			}
			b.WriteByte(esc)
		case quote != 0 && rune(c) == quote:
			quote = 0
		case quote != 0:
			b.WriteByte(c)
		case c == '"' || c == '\'':
			quote = rune(c)
		case c == ' ' || c == '\t':
			return "", fmt.Errorf("more than one word: %q", s)
		default:
			b.WriteByte(c)
		}
	}
	if quote != 0 {
		return "", errors.New("unterminated quote")
	}
	word := b.String()
	var out strings.Builder
	for i := 0; i < len(word); i++ {
		if word[i] != '%' {
			out.WriteByte(word[i])
			continue
		}
		if i+1 == len(word) || word[i+1] != '%' {
			return "", fmt.Errorf("specifier %%%s would be expanded", word[i+1:min(i+2, len(word))])
		}
		out.WriteByte('%')
		i++
	}
	return out.String(), nil
}

// settingLines returns the non-comment lines of a unit as a set.
func settingLines(unit string) map[string]bool {
	lines := make(map[string]bool)
	for l := range strings.SplitSeq(unit, "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			lines[l] = true
		}
	}
	return lines
}

// settingValue returns the value of the first key= line.
func settingValue(unit, key string) string {
	for l := range strings.SplitSeq(unit, "\n") {
		if v, ok := strings.CutPrefix(l, key+"="); ok {
			return v
		}
	}
	return ""
}

// lineDiff lists the lines that differ between want and got.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for i := range max(len(w), len(g)) {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			fmt.Fprintf(&b, "line %d:\n  want %q\n  got  %q\n", i+1, wl, gl)
		}
	}
	return b.String()
}

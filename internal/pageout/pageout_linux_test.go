package pageout

import (
	"bufio"
	"bytes"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// rssFileKiB is RssFile of this process, from /proc/self/status.
func rssFileKiB(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) >= 2 && f[0] == "RssFile:" {
			n, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no RssFile in /proc/self/status")
	return 0
}

// populate maps every page of the test binary's read-only mappings (as a
// long-running daemon would have most of them), so a test sees them go
// whatever ran before it.
func populate(t *testing.T) {
	t.Helper()
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	maps, err := os.Open("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	defer maps.Close()
	ranges, err := readOnlyMappings(maps, exe)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ranges {
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, m.start, m.end-m.start, unix.MADV_POPULATE_READ); errno != 0 {
			t.Fatalf("MADV_POPULATE_READ: %v", errno)
		}
	}
}

// The pages of this test binary leave RssFile: the kernel took the advice,
// paged out (the process may) or unmapped (a daemon that may not page out
// its binary: root owns it, the daemon runs as its user).
func TestGiveBackReturnsBinaryPages(t *testing.T) {
	t.Setenv(EnvNoPageOut, "")
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		give func() Result
	}{
		{"page out", GiveBackStartup},
		{"unmap where it may not page out", func() Result { return giveBack(exe, unix.MADV_DONTNEED) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			populate(t)
			before := rssFileKiB(t)
			r := tc.give()
			after := rssFileKiB(t)
			if r.Skipped != "" || r.Err != nil || r.Mappings < 2 {
				t.Fatalf("got %+v, want the read-only mappings of the binary advised without error", r)
			}
			// The test binary is several MB resident after populate; what
			// runs from here on faults back a few pages.
			if after > before-1024 {
				t.Errorf("RssFile %d KiB before, %d KiB after: want at least 1 MiB given back", before, after)
			}
		})
	}
}

// Before the page-out it collects once, so the garbage the package inits
// left is freed; the kill switch turns both off.
func TestGiveBackStartupCollectsOnce(t *testing.T) {
	for _, tc := range []struct {
		env  string
		want uint32
	}{{"", 1}, {"1", 0}} {
		t.Setenv(EnvNoPageOut, tc.env)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		GiveBackStartup()
		runtime.ReadMemStats(&after)
		if got := after.NumForcedGC - before.NumForcedGC; got != tc.want {
			t.Errorf("%s=%q: %d forced collections, want %d", EnvNoPageOut, tc.env, got, tc.want)
		}
	}
}

func TestTracedIn(t *testing.T) {
	for status, want := range map[string]bool{
		"Name:\tlatch\nTracerPid:\t0\nUid:\t1000\n":    false,
		"Name:\tlatch\nTracerPid:\t4242\nUid:\t1000\n": true,
		"Name:\tlatch\n": true, // unsure: keep the pages
	} {
		if got := tracedIn(status); got != want {
			t.Errorf("tracedIn(%q) = %v, want %v", status, got, want)
		}
	}
}

func TestGiveBackStartupKillSwitch(t *testing.T) {
	t.Setenv(EnvNoPageOut, "1")
	if r := GiveBackStartup(); r.Skipped != EnvNoPageOut+"=1" || r.Mappings != 0 {
		t.Errorf("with %s=1: %+v, want nothing advised", EnvNoPageOut, r)
	}
}

func TestReadOnlyMappings(t *testing.T) {
	const exe = "/opt/la tch/latch (deleted)"
	tests := []struct {
		name, maps string
		want       []addrRange
		wantErr    bool
	}{
		{"text, rodata; data and others skipped", strings.Join([]string{
			"00400000-00a00000 r-xp 00000000 fd:01 42 " + exe,
			"00a00000-00f00000 r--p 00600000 fd:01 42 " + exe,
			"00f00000-00f40000 rw-p 00b00000 fd:01 42 " + exe,
			"00f40000-00f80000 rw-p 00000000 00:00 0",
			"7f0000000000-7f0000001000 r--p 00000000 fd:01 43 /opt/la tch/latch",
			"7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0 [stack]",
		}, "\n"), []addrRange{{0x400000, 0xa00000}, {0xa00000, 0xf00000}}, false},
		{"malformed range", "zz-00a00000 r-xp 00000000 fd:01 42 " + exe, nil, true},
		{"empty range", "00a00000-00a00000 r-xp 00000000 fd:01 42 " + exe, nil, true},
		{"nothing of the binary", "00f40000-00f80000 rw-p 00000000 00:00 0\n", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readOnlyMappings(strings.NewReader(tt.maps), exe)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error: %v", err, tt.wantErr)
			}
			if !tt.wantErr && !slices.Equal(got, tt.want) {
				t.Errorf("got %x, want %x", got, tt.want)
			}
		})
	}
}

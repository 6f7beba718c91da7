package pageout

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// GiveBackStartup returns to the kernel the pages of latch's own binary
// that start-up touched and idle does not need: package inits, config
// parsing, cobra, TLS set-up. Go's linker lays functions out by package
// and the kernel maps 64 KiB around every fault of a cached file
// (fault-around), so by the time the program is ready nearly all of .text,
// .rodata and .gopclntab is resident, most of it never to run again.
//
// For each read-only mapping of the executable (never a writable one: its
// pages may hold data the program wrote), it sets MADV_RANDOM, which turns
// off read-ahead on the faults that follow, then MADV_PAGEOUT, which
// unmaps the pages and drops them from the page cache; then it drops what
// is left of the file in the page cache that nothing maps (read-ahead
// brought in more than was mapped). So the pages leave VmRSS and the
// service cgroup's memory.current together. What the program touches next
// comes back a page at a time: fault-around maps only pages still in the
// page cache (Linux 6.x's should_fault_around does not look at
// MADV_RANDOM; it is read-ahead that would bring the window back).
//
// The kernel pages out file pages only for a caller that owns the file or
// may write it (mm/madvise.c, can_do_file_pageout); for a binary root owns
// and a daemon running as its user it silently changes nothing. There
// MADV_DONTNEED unmaps the pages instead, and the eviction that follows
// drops them from the page cache. MADV_DONTNEED would also drop a copied
// page of the text (a debugger's breakpoint), so a traced daemon keeps
// its pages. Neither evicts a page another process maps too.
//
// First it collects once and returns the freed heap (freeInitGarbage).
// It is advice: an error is reported, never fatal, and the program runs
// on as before. LATCH_NO_PAGEOUT=1 turns both off.
func GiveBackStartup() Result {
	if os.Getenv(EnvNoPageOut) == "1" {
		return Result{Skipped: EnvNoPageOut + "=1"}
	}
	took := freeInitGarbage()
	r := pageOutBinary()
	r.Collection = took
	return r
}

// freeInitGarbage collects once and returns the freed heap to the kernel,
// before the page-out so that the collector's own code leaves with the
// rest. Package inits leave ~1 MB of garbage (regexp compilation:
// mautrix/id's init allocates 275 KB, 64 KB of it live) that, below
// GOGC's 4 MB minimum heap, no collection would free at idle. For the
// daemon it takes 2.1–2.5 ms (the collection 1.2 ms of it; 2 MB of heap,
// under 1 MB live) and
// idle VmRSS drops from 10.35 to 9.81 MB (median of 5 bench runs each,
// ranges 10.14–10.48 and 9.73–9.91; bench/README.md).
func freeInitGarbage() time.Duration {
	start := time.Now()
	debug.FreeOSMemory()
	return time.Since(start)
}

// pageOutBinary gives back the executable's read-only pages.
func pageOutBinary() Result {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return Result{Skipped: "no /proc/self/exe", Err: err}
	}
	advice := unix.MADV_PAGEOUT
	if !mayPageOut(exe) {
		if traced() {
			return Result{Skipped: "traced by a debugger"}
		}
		advice = unix.MADV_DONTNEED
	}
	return giveBack(exe, advice)
}

// giveBack advises MADV_RANDOM and then advice over the read-only mappings
// of exe, and evicts exe from the page cache.
func giveBack(exe string, advice int) Result {
	maps, err := os.Open("/proc/self/maps")
	if err != nil {
		return Result{Skipped: "no /proc/self/maps", Err: err}
	}
	defer maps.Close()
	ranges, err := readOnlyMappings(maps, exe)
	if err != nil {
		return Result{Skipped: "unreadable /proc/self/maps", Err: err}
	}
	var r Result
	for _, m := range ranges {
		for _, a := range []int{unix.MADV_RANDOM, advice} {
			// Raw addresses from /proc, not Go pointers: no []byte may
			// cover the program's own text.
			if _, _, errno := unix.Syscall(unix.SYS_MADVISE, m.start, m.end-m.start, uintptr(a)); errno != 0 && r.Err == nil {
				r.Err = fmt.Errorf("madvise %#x-%#x: %w", m.start, m.end, errno)
			}
		}
		r.Mappings++
		r.Bytes += uint64(m.end - m.start)
	}
	if err := evictFile(exe); err != nil && r.Err == nil {
		r.Err = err
	}
	return r
}

// mayPageOut reports whether the kernel pages out path's pages for this
// process: it owns the file, may write it, or has CAP_FOWNER (root).
func mayPageOut(path string) bool {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return false
	}
	euid := os.Geteuid()
	return euid == 0 || int(st.Uid) == euid || unix.Access(path, unix.W_OK) == nil
}

// traced reports whether a debugger is attached (TracerPid in
// /proc/self/status); when unsure, it says so.
func traced() bool {
	b, err := os.ReadFile("/proc/self/status")
	return err != nil || tracedIn(string(b))
}

// tracedIn reads TracerPid from the text of /proc/<pid>/status; without
// one it says traced.
func tracedIn(status string) bool {
	for line := range strings.Lines(status) {
		if v, ok := strings.CutPrefix(line, "TracerPid:"); ok {
			return strings.TrimSpace(v) != "0"
		}
	}
	return true
}

// evictFile drops path's pages that no process maps from the page cache:
// read-ahead brought in more of the binary at start than was ever mapped.
func evictFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		return fmt.Errorf("fadvise %s: %w", path, err)
	}
	return nil
}

type addrRange struct{ start, end uintptr }

// readOnlyMappings reads /proc/<pid>/maps lines ("start-end perms offset
// dev inode path") and returns the mappings of path without write
// permission.
func readOnlyMappings(maps io.Reader, path string) ([]addrRange, error) {
	var out []addrRange
	sc := bufio.NewScanner(maps)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 6 || strings.Join(f[5:], " ") != path || strings.Contains(f[1], "w") {
			continue
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if !ok || err1 != nil || err2 != nil || end <= start {
			return nil, fmt.Errorf("malformed mapping %q", f[0])
		}
		out = append(out, addrRange{uintptr(start), uintptr(end)})
	}
	return out, sc.Err()
}

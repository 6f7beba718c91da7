package tools

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The race tests swap a path in the workspace back and forth between
// something inside it and a symlink that leads outside, while a tool works on
// that path. A check-then-open implementation (resolve the path, check it is
// inside, then open it by name) loses this race: the symlink can appear
// between the check and the open. os.Root cannot lose it, because each
// component is opened relative to the directory descriptor that was checked.
//
// Two shapes of swap are raced:
//
//	file: ws/target is a regular file  <->  a symlink to ../out/secret
//	dir:  ws/d is a real directory     <->  a symlink to ../out (both hold f)
//
// The swap is renameat2(RENAME_EXCHANGE) of the raced name and a spare one,
// so the raced name always exists and one swap is one cheap syscall.

// raceInside is the content of the inside file or of d/f; the edit raced
// below changes "hello", so a secret that leaked in would read
// "howdy TOPSECRET-…".
const raceInside = "hello public\n"

// raceBudget bounds one race loop; it stops at whichever limit comes first.
type raceBudget struct {
	iters int
	time  time.Duration
}

func raceBudgets() (naive, ours raceBudget) {
	if testing.Short() {
		return raceBudget{5000, 2 * time.Second}, raceBudget{2000, 300 * time.Millisecond}
	}
	return raceBudget{20_000, 10 * time.Second}, raceBudget{20_000, time.Second}
}

// raceFixture is a workspace with a swapper flipping one path in it.
type raceFixture struct {
	*fsFixture
	mode  string // "file" or "dir"
	name  string // the path the tools get, relative to the workspace: "target" or "d/f"
	live  string // host path of the raced name: ws/target or ws/d
	spare string // host path of the other half of the exchange, out of the tools' way
	link  string // target of the symlink out

	swaps atomic.Int64
	leaks atomic.Int64 // times the swapper found the secret inside the workspace
	fails atomic.Int64 // swap steps that failed
	stop  chan struct{}
	done  chan struct{}
}

func newRaceFixture(t *testing.T, mode string) *raceFixture {
	fx := &raceFixture{fsFixture: newFSFixture(t), mode: mode, stop: make(chan struct{}), done: make(chan struct{})}
	switch mode {
	case "file":
		fx.name, fx.link = "target", "../out/secret"
		fx.file("target", raceInside)
	case "dir":
		fx.name, fx.link = "d/f", "../out"
		fx.file("d/f", raceInside)
		fsMustWrite(t, filepath.Join(fx.out, "f"), "hello "+fx.secret+"\n")
	default:
		t.Fatalf("unknown race mode %q", mode)
	}
	fx.live = filepath.Join(fx.ws, strings.Split(fx.name, "/")[0])
	fx.spare = filepath.Join(fx.ws, ".spare")
	if err := os.Symlink(fx.link, fx.spare); err != nil {
		t.Fatal(err)
	}
	return fx
}

// start runs the swapper until the returned function is called; that
// function waits for it to finish.
func (fx *raceFixture) start() (stop func()) {
	go func() {
		defer close(fx.done)
		for {
			select {
			case <-fx.stop:
				return
			default:
			}
			fx.swap()
			fx.swaps.Add(1)
		}
	}()
	return func() {
		close(fx.stop)
		<-fx.done
	}
}

// swap exchanges the live and the spare name, then tends the half that is
// now spare, where no tool call can reach it by the raced name.
func (fx *raceFixture) swap() {
	err := unix.Renameat2(unix.AT_FDCWD, fx.live, unix.AT_FDCWD, fx.spare, unix.RENAME_EXCHANGE)
	if err != nil {
		// A filesystem without RENAME_EXCHANGE: three renames, leaving a
		// moment with no live name. The race is slower but still a race.
		tmp := fx.spare + "-tmp"
		if os.Rename(fx.live, tmp) != nil || os.Rename(fx.spare, fx.live) != nil || os.Rename(tmp, fx.spare) != nil {
			fx.fails.Add(1)
			return
		}
	}
	fi, err := os.Lstat(fx.spare)
	if err != nil {
		fx.fails.Add(1)
		return
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return
	}
	if fx.mode == "dir" {
		fx.tend(filepath.Join(fx.spare, "f"))
		return
	}
	fx.tend(fx.spare)
	// A write that resolved target while it was a file and renamed over it
	// once it was the symlink replaced the symlink: make a new one.
	if fi, err := os.Lstat(fx.live); err == nil && fi.Mode()&fs.ModeSymlink == 0 {
		tmp := fx.spare + "-link"
		_ = os.Remove(tmp)
		if os.Symlink(fx.link, tmp) != nil || os.Rename(tmp, fx.spare) != nil {
			fx.fails.Add(1)
		}
	}
}

// tend counts a leak if the regular file at p holds the secret (a tool that
// read the secret through the swapped symlink and wrote the result back
// inside would leave it there) and puts back raceInside if a tool changed it.
// O_NOFOLLOW: p is never followed out, should a symlink be there.
func (fx *raceFixture) tend(p string) {
	b, err := readNoFollow(p)
	if err != nil {
		return // a write may have replaced it a moment ago and left nothing yet
	}
	if bytes.Contains(b, []byte(fx.secret)) {
		fx.leaks.Add(1)
	}
	if string(b) == raceInside {
		return
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC|syscall.O_NOFOLLOW, 0)
	if err != nil {
		fx.fails.Add(1)
		return
	}
	if _, err := f.WriteString(raceInside); err != nil {
		fx.fails.Add(1)
	}
	f.Close()
}

func readNoFollow(p string) ([]byte, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var buf bytes.Buffer
	_, err = buf.ReadFrom(f)
	return buf.Bytes(), err
}

// raceStats is what one race loop saw.
type raceStats struct {
	iters       int
	escapes     int
	firstEscape int // iteration of the first escape, 1-based; 0 if none
	inside      int // calls that saw or changed the inside file
	refused     int // calls refused with ErrEscapes
	other       int // calls that failed otherwise (mid-swap: not found, no match)
	swaps       int64
	elapsed     time.Duration
}

// race runs call against the swapper within budget and stops early at the
// first escape if stopAtEscape. call reports whether this call escaped and
// whether it saw the inside object.
func (fx *raceFixture) race(budget raceBudget, stopAtEscape bool, call func() (escaped, inside bool, err error)) raceStats {
	var st raceStats
	stop := fx.start()
	start := time.Now()
	for st.iters < budget.iters && time.Since(start) < budget.time {
		st.iters++
		escaped, inside, err := call()
		switch {
		case escaped:
			st.escapes++
			if st.firstEscape == 0 {
				st.firstEscape = st.iters
			}
		case inside:
			st.inside++
		case errors.Is(err, ErrEscapes):
			st.refused++
		default:
			st.other++
		}
		if escaped && stopAtEscape {
			break
		}
	}
	st.elapsed = time.Since(start)
	stop()
	st.swaps = fx.swaps.Load()
	return st
}

// naiveRead is the check-then-open read the workspace must not be: resolve
// every symlink, check that the result is inside the workspace, then open
// it. The check is right at the moment it runs, and worthless by the time
// os.ReadFile opens the path again, component by component.
func naiveRead(ws, name string) ([]byte, error) {
	p, err := filepath.EvalSymlinks(filepath.Join(ws, name))
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(p, ws+string(filepath.Separator)) {
		return nil, ErrEscapes
	}
	return os.ReadFile(p)
}

// TestFSRaceNaiveCheckThenOpenEscapes shows that the race below is real on
// this machine: the naive read leaks the secret. It logs rather than fails
// if the scheduler never interleaves the two goroutines badly enough within
// the budget, since then it proves nothing either way.
func TestFSRaceNaiveCheckThenOpenEscapes(t *testing.T) {
	budget, _ := raceBudgets()
	for _, mode := range []string{"file", "dir"} {
		t.Run(mode, func(t *testing.T) {
			fx := newRaceFixture(t, mode)
			// Without the race, the check does its job: swap the symlink in
			// and check that the naive read refuses it.
			fx.swap()
			if _, err := naiveRead(fx.ws, fx.name); !errors.Is(err, ErrEscapes) {
				t.Fatalf("naive read of a symlink out without a race: err = %v, want ErrEscapes", err)
			}
			fx.swap()

			st := fx.race(budget, true, func() (bool, bool, error) {
				b, err := naiveRead(fx.ws, fx.name)
				return bytes.Contains(b, []byte(fx.secret)), err == nil, err
			})
			if st.escapes == 0 {
				t.Logf("naive %s race: no escape in %d iterations (%v, %d swaps); this machine did not show the race",
					mode, st.iters, st.elapsed.Round(time.Millisecond), st.swaps)
				return
			}
			t.Logf("naive %s race: check-then-open read the secret at iteration %d (%v, %d swaps)",
				mode, st.firstEscape, st.elapsed.Round(time.Microsecond), st.swaps)
		})
	}
}

// TestFSRaceWorkspaceNeverEscapes runs the same race against the tools and
// allows no escape: no secret in a result, no change outside the workspace,
// and no secret copied into it.
func TestFSRaceWorkspaceNeverEscapes(t *testing.T) {
	_, budget := raceBudgets()
	ctx := context.Background()
	tools := []struct {
		name string
		call func(fx *raceFixture) (escaped, inside bool, err error)
	}{
		{"read", func(fx *raceFixture) (bool, bool, error) {
			got, err := fx.w.ReadFile(ctx, ReadArgs{Path: fx.name})
			return strings.Contains(got, fx.secret), strings.Contains(got, "public"), err
		}},
		{"write", func(fx *raceFixture) (bool, bool, error) {
			_, err := fx.w.WriteFile(ctx, WriteArgs{Path: fx.name, Content: "written by the tool\n"})
			return false, err == nil, err
		}},
		{"edit", func(fx *raceFixture) (bool, bool, error) {
			_, err := fx.w.EditFile(ctx, EditArgs{Path: fx.name, Old: "hello", New: "howdy"})
			return false, err == nil, err
		}},
		{"grep", func(fx *raceFixture) (bool, bool, error) {
			got, err := fx.w.Grep(ctx, GrepArgs{Pattern: "TOPSECRET|public"})
			// In dir mode .spare/f matches whenever the real directory is
			// the spare; what counts is d/f.
			inside := strings.Contains("\n"+got, "\n"+fx.name+":1:hello public")
			return strings.Contains(got, fx.secret), inside, err
		}},
	}
	for _, tool := range tools {
		for _, mode := range []string{"file", "dir"} {
			t.Run(tool.name+"/"+mode, func(t *testing.T) {
				fx := newRaceFixture(t, mode)
				before := fx.outside()
				last := before
				st := fx.race(budget, false, func() (bool, bool, error) {
					escaped, inside, err := tool.call(fx)
					if tool.name == "write" || tool.name == "edit" {
						// Any change outside is an escape; count each once.
						if now := fx.outside(); !maps.Equal(last, now) {
							escaped, last = true, now
						}
					}
					return escaped, inside, err
				})
				t.Logf("%s %s race: %d calls in %v against %d swaps (%d failed): %d escapes, %d saw the inside file, %d refused as escaping, %d other errors (mid-swap)",
					tool.name, mode, st.iters, st.elapsed.Round(time.Millisecond), st.swaps, fx.fails.Load(),
					st.escapes, st.inside, st.refused, st.other)
				if st.escapes != 0 {
					t.Errorf("%d of %d calls escaped the workspace (first at call %d)", st.escapes, st.iters, st.firstEscape)
				}
				if n := fx.leaks.Load(); n != 0 {
					t.Errorf("the secret was copied into the workspace %d times", n)
				}
				if after := fx.outside(); !maps.Equal(before, after) {
					t.Errorf("outside the workspace changed:\nbefore %v\nafter  %v", before, after)
				}
				// The race only means something if both sides of the swap
				// were hit: calls that met the inside object and calls
				// that did not.
				if st.inside == 0 || st.inside == st.iters {
					t.Errorf("%d of %d calls saw the inside object; the swapper did not interleave with the tool", st.inside, st.iters)
				}
			})
		}
	}
}

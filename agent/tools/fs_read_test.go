package tools

import (
	"bufio"
	"context"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

func TestReadFile(t *testing.T) {
	ten := ""
	for i := 1; i <= 10; i++ {
		ten += "line " + string(rune('0'+i%10)) + "\n"
	}
	tests := []struct {
		name    string
		content string
		args    ReadArgs
		want    string
		wantErr string
	}{
		{
			name:    "numbered lines",
			content: "a\nb\n",
			want:    "     1\ta\n     2\tb\n",
		},
		{
			name:    "last line without newline",
			content: "a\nb",
			want:    "     1\ta\n     2\tb\n",
		},
		{
			name:    "offset and limit, more follow",
			content: ten,
			args:    ReadArgs{Offset: 3, Limit: 2},
			want:    "     3\tline 3\n     4\tline 4\n[more lines follow; continue with offset=5]\n",
		},
		{
			name:    "limit reaching the end has no note",
			content: ten,
			args:    ReadArgs{Offset: 9, Limit: 2},
			want:    "     9\tline 9\n    10\tline 0\n",
		},
		{
			name:    "offset past the end",
			content: ten,
			args:    ReadArgs{Offset: 11},
			wantErr: "read f: offset 11 is past the end; the file has 10 lines",
		},
		{
			name:    "negative offset",
			content: ten,
			args:    ReadArgs{Offset: -1},
			wantErr: "read f: offset and limit must not be negative",
		},
		{
			name:    "empty file",
			content: "",
			want:    "[f is empty]\n",
		},
		{
			name:    "CRLF kept",
			content: "a\r\nb\r\n",
			want:    "     1\ta\r\n     2\tb\r\n",
		},
		{
			name:    "NUL byte is binary",
			content: "text\x00more",
			wantErr: "read f: looks binary (it contains NUL bytes); not shown",
		},
		{
			name:    "invalid UTF-8 is binary",
			content: "caf\xe9 latin-1\n",
			wantErr: "read f: is not UTF-8 text; not shown",
		},
		{
			name:    "rune split by the sniff window is text",
			content: strings.Repeat("a\n", (sniffLen-2)/2) + "bé\n", // "é" starts at byte sniffLen-1
			args:    ReadArgs{Offset: sniffLen / 2},
			want:    "  4096\tbé\n",
		},
		{
			name:    "invalid UTF-8 after the sniff window is replaced",
			content: strings.Repeat("a\n", sniffLen) + "caf\xe9\n",
			args:    ReadArgs{Offset: sniffLen + 1},
			want:    "  8193\tcaf\uFFFD\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fx := newFSFixture(t)
			fx.file("f", tt.content)
			tt.args.Path = "f"
			got, err := fx.w.ReadFile(context.Background(), tt.args)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}

func TestReadFileCaps(t *testing.T) {
	ctx := context.Background()
	t.Run("output cap says where to continue", func(t *testing.T) {
		fx := newFSFixture(t)
		fx.w.lim.readOutput = 64
		fx.file("f", strings.Repeat("0123456789\n", 20))
		got, err := fx.w.ReadFile(ctx, ReadArgs{Path: "f"})
		if err != nil {
			t.Fatal(err)
		}
		// Each line is 18 bytes ("     n\t0123456789\n"): three fit in 64.
		want := "     1\t0123456789\n     2\t0123456789\n     3\t0123456789\n" +
			"[output cut at 64 bytes; continue with offset=4]\n"
		if got != want {
			t.Errorf("got\n%q\nwant\n%q", got, want)
		}
		next, err := fx.w.ReadFile(ctx, ReadArgs{Path: "f", Offset: 4, Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(next, "     4\t") {
			t.Errorf("continuing at offset 4 got %q", next)
		}
	})
	t.Run("long line is cut", func(t *testing.T) {
		fx := newFSFixture(t)
		fx.w.lim.readLine = 10
		fx.file("f", strings.Repeat("x", 9)+"é"+strings.Repeat("y", 100)+"\nshort\n")
		got, err := fx.w.ReadFile(ctx, ReadArgs{Path: "f"})
		if err != nil {
			t.Fatal(err)
		}
		// The kept part stops before "é", which does not fit whole.
		want := "     1\txxxxxxxxx … [line cut: 102 bytes more]\n     2\tshort\n"
		if got != want {
			t.Errorf("got\n%q\nwant\n%q", got, want)
		}
	})
	t.Run("scan cap", func(t *testing.T) {
		fx := newFSFixture(t)
		fx.w.lim.readScan = 100
		fx.file("f", strings.Repeat("0123456789\n", 20)) // 220 bytes
		_, err := fx.w.ReadFile(ctx, ReadArgs{Path: "f", Offset: 15})
		if want := "read f: line 15 is beyond the first 100 bytes"; err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Fatalf("err = %v, want prefix %q", err, want)
		}
		got, err := fx.w.ReadFile(ctx, ReadArgs{Path: "f", Offset: 5})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(got, "    10\t0123456789\n[stopped after the first 100 bytes of the file; read goes no further]\n") {
			t.Errorf("got %q, want lines 5-10 and a note", got)
		}
	})
	t.Run("scan cap at the exact end of the file", func(t *testing.T) {
		fx := newFSFixture(t)
		fx.w.lim.readScan = 22
		fx.file("f", "0123456789\n0123456789\n")
		got, err := fx.w.ReadFile(ctx, ReadArgs{Path: "f"})
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(got, "[") {
			t.Errorf("got %q, want no note", got)
		}
	})
}

func TestReadFileRefusesNonFiles(t *testing.T) {
	fx := newFSFixture(t)
	fx.file("dir/x", "")
	if _, err := fx.w.ReadFile(context.Background(), ReadArgs{Path: "dir"}); err == nil ||
		err.Error() != "read dir: is a directory; list it instead" {
		t.Errorf("read dir: err = %v", err)
	}
	// A FIFO with no writer would block a plain open forever.
	if err := syscall.Mkfifo(filepath.Join(fx.ws, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := fx.w.ReadFile(context.Background(), ReadArgs{Path: "fifo"})
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || err.Error() != "read fifo: not a regular file" {
			t.Errorf("read fifo: err = %v", err)
		}
	case <-time.After(10 * time.Second):
		// Unblock the open so the goroutine ends with the test.
		f, err := os.OpenFile(filepath.Join(fx.ws, "fifo"), os.O_WRONLY, 0)
		if err == nil {
			f.Close()
		}
		<-done
		t.Fatal("ReadFile blocked on a FIFO")
	}
}

func TestReadFileCanceled(t *testing.T) {
	fx := newFSFixture(t)
	fx.file("f", "a\n")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := fx.w.ReadFile(ctx, ReadArgs{Path: "f"}); !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}

func TestReadCappedLine(t *testing.T) {
	tests := []struct {
		name           string
		in             string
		keep           int
		budget         int64 // 0: no budget
		wantLine       string
		wantDropped    int
		wantN          int64
		wantUnfinished bool
	}{
		{"short", "abc\nrest", 10, 0, "abc", 0, 4, false},
		{"exactly keep with newline", "abcd\n", 4, 0, "abcd", 0, 5, false},
		{"longer than the buffer", strings.Repeat("z", 50) + "\n", 5, 0, "zzzzz", 45, 51, false},
		{"no newline at EOF", "abc", 10, 0, "abc", 0, 3, false},
		{"cut inside a rune", "ab€cd\n", 3, 0, "ab", 5, 8, false},
		{"empty input", "", 10, 0, "", 0, 0, false},
		// The budget stops a line that goes on past it, after the buffer
		// (16 bytes here) in which it ran out.
		{"budget runs out inside the line", strings.Repeat("y", 50) + "\n", 5, 10, "yyyyy", 11, 16, true},
		{"budget runs out inside a rune", strings.Repeat("y", 15) + "€" + strings.Repeat("y", 20), 20, 16, strings.Repeat("y", 15), 1, 16, true},
		{"budget runs out before the newline", strings.Repeat("y", 16) + "\nnext", 5, 16, "yyyyy", 11, 16, false},
		{"budget runs out at EOF", strings.Repeat("y", 16), 5, 16, "yyyyy", 11, 16, false},
		{"line ends in the buffer the budget runs out in", strings.Repeat("y", 10) + "\nnext", 5, 5, "yyyyy", 5, 11, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// 16 bytes is bufio's smallest buffer: long lines take several
			// ReadSlice calls.
			br := bufio.NewReaderSize(strings.NewReader(tt.in), 16)
			budget := tt.budget
			if budget == 0 {
				budget = math.MaxInt64
			}
			l, err := readCappedLine(context.Background(), br, tt.keep, budget)
			if err != nil && !errors.Is(err, io.EOF) {
				t.Fatal(err)
			}
			if string(l.text) != tt.wantLine || l.dropped != tt.wantDropped || l.consumed != tt.wantN || l.unfinished != tt.wantUnfinished {
				t.Errorf("got (%q, %d, %d, unfinished=%v), want (%q, %d, %d, unfinished=%v)",
					l.text, l.dropped, l.consumed, l.unfinished, tt.wantLine, tt.wantDropped, tt.wantN, tt.wantUnfinished)
			}
		})
	}
}

// endlessLine is one line without end: 'x' forever. It cancels its context
// once it has handed out after bytes, as /stop would in the middle of a read.
type endlessLine struct {
	after  int64
	read   int64
	cancel context.CancelFunc
}

func (e *endlessLine) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	e.read += int64(len(p))
	if e.read >= e.after {
		e.cancel()
	}
	return len(p), nil
}

// TestReadCappedLineSeesCancel: cancelling while one line is read ends the
// read with ctx's error; without a look at ctx inside the line, the read
// of an endless line would never return, so the budget is set high but
// finite to keep the test from hanging if the look goes missing.
func TestReadCappedLineSeesCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	src := &endlessLine{after: 2 << 20, cancel: cancel}
	br := bufio.NewReaderSize(src, 64<<10)
	const budget = 64 << 20
	l, err := readCappedLine(ctx, br, 100, budget)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v after reading %s of the line, want context.Canceled", err, sizeString(src.read))
	}
	if src.read >= budget {
		t.Errorf("read all %s of the budget after the cancel", sizeString(src.read))
	}
	if l.consumed != 0 {
		t.Errorf("a canceled read returned a line of %d bytes", l.consumed)
	}
}

// oneLongLine writes a file of size bytes that is one line: text, then a
// sparse run of NUL bytes (past the binary sniff), which costs no disk.
func oneLongLine(t *testing.T, fx *fsFixture, name string, size int64) {
	t.Helper()
	p := filepath.Join(fx.ws, name)
	fsMustWrite(t, p, strings.Repeat("a", sniffLen+1))
	if err := os.Truncate(p, size); err != nil {
		t.Fatal(err)
	}
}

// TestReadFileScanCapInsideALine: the scan cap holds when the file is one
// line longer than the cap; before, the whole line was read, however long.
func TestReadFileScanCapInsideALine(t *testing.T) {
	fx := newFSFixture(t)
	fx.w.lim.readScan = 1 << 20
	fx.w.lim.readLine = 10
	oneLongLine(t, fx, "huge.txt", 64<<20)
	got, err := fx.w.ReadFile(context.Background(), ReadArgs{Path: "huge.txt"})
	if err != nil {
		t.Fatal(err)
	}
	want := "     1\taaaaaaaaaa … [line cut]\n[stopped after the first 1 MiB of the file; read goes no further]\n"
	if got != want {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
	_, err = fx.w.ReadFile(context.Background(), ReadArgs{Path: "huge.txt", Offset: 2})
	if want := "read huge.txt: line 2 is beyond the first 1 MiB"; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("offset 2: err = %v, want prefix %q", err, want)
	}
}

// cancelAfterChecks is a context whose Err turns to context.Canceled after
// it has said nil n times: /stop arriving while a tool is in the middle of
// its work, at a point the test controls without timing. Only Err is
// overridden; the tools under test poll it.
type cancelAfterChecks struct {
	context.Context
	n atomic.Int64
}

func newCancelAfterChecks(n int64) *cancelAfterChecks {
	c := &cancelAfterChecks{Context: context.Background()}
	c.n.Store(n)
	return c
}

func (c *cancelAfterChecks) Err() error {
	if c.n.Add(-1) < 0 {
		return context.Canceled
	}
	return nil
}

// TestReadFileCanceledInsideALine: a read cancelled while it is inside one
// long line returns ctx's error, not a result. The scan cap is lifted so
// that only the cancel can stop it.
func TestReadFileCanceledInsideALine(t *testing.T) {
	fx := newFSFixture(t)
	fx.w.lim.readScan = 1 << 40
	oneLongLine(t, fx, "huge.txt", 32<<20)
	// A few looks at ctx happen before the first line; the rest, one a
	// MiB, inside it.
	ctx := newCancelAfterChecks(8)
	got, err := fx.w.ReadFile(ctx, ReadArgs{Path: "huge.txt"})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v (result %.80q), want context.Canceled", err, got)
	}
}

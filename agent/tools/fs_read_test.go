package tools

import (
	"bufio"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
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
		name        string
		in          string
		keep        int
		wantLine    string
		wantDropped int
		wantN       int64
	}{
		{"short", "abc\nrest", 10, "abc", 0, 4},
		{"exactly keep with newline", "abcd\n", 4, "abcd", 0, 5},
		{"longer than the buffer", strings.Repeat("z", 50) + "\n", 5, "zzzzz", 45, 51},
		{"no newline at EOF", "abc", 10, "abc", 0, 3},
		{"cut inside a rune", "ab€cd\n", 3, "ab", 5, 8},
		{"empty input", "", 10, "", 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// 16 bytes is bufio's smallest buffer: long lines take several
			// ReadSlice calls.
			br := bufio.NewReaderSize(strings.NewReader(tt.in), 16)
			line, dropped, n, _ := readCappedLine(br, tt.keep)
			if string(line) != tt.wantLine || dropped != tt.wantDropped || n != tt.wantN {
				t.Errorf("got (%q, %d, %d), want (%q, %d, %d)",
					line, dropped, n, tt.wantLine, tt.wantDropped, tt.wantN)
			}
		})
	}
}

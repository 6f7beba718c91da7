package tools

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"unicode/utf8"
)

// ReadArgs are the arguments of the read tool.
type ReadArgs struct {
	Path   string `json:"path"`
	Offset int    `json:"offset,omitempty"` // first line to show, 1-based; 0 means 1
	Limit  int    `json:"limit,omitempty"`  // most lines to show; 0 means as many as fit
}

// ReadFile returns lines of a text file in the workspace, each prefixed with
// its line number and a tab ("    12\tcode"), as `cat -n` prints them. The
// numbers let the model ask for the next window with Offset and point at
// lines precisely; they are not part of the file, which the tool description
// must say so the model leaves them out of an edit's Old text.
//
// Output is bounded: a line longer than 2000 bytes is cut, the result stops
// at about 50 KiB, and no more than the first 16 MiB of a file is scanned.
// Whenever something is left out, a bracketed note says what and, where it
// applies, which Offset continues. Binary files (a NUL byte or invalid UTF-8
// in the first 8 KiB) and anything that is not a regular file are refused.
func (w *Workspace) ReadFile(ctx context.Context, a ReadArgs) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	name, err := w.rel(a.Path)
	if err != nil {
		return "", err
	}
	if a.Offset < 0 || a.Limit < 0 {
		return "", fmt.Errorf("read %s: offset and limit must not be negative", name)
	}
	// O_NONBLOCK keeps a FIFO planted in the workspace from blocking the
	// open; it does not change how a regular file reads.
	f, err := w.root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return "", fsError("read", name, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", fsError("read", name, err)
	}
	if fi.IsDir() {
		return "", fmt.Errorf("read %s: is a directory; list it instead", name)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("read %s: not a regular file", name)
	}
	br := bufio.NewReaderSize(f, 64<<10)
	head, err := br.Peek(sniffLen)
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fsError("read", name, err)
	}
	if p := textProblem(head, len(head) < sniffLen); p != "" {
		return "", fmt.Errorf("read %s: %s; not shown", name, p)
	}
	return w.readLines(ctx, br, name, a)
}

// readLines formats the lines a asks for from br.
func (w *Workspace) readLines(ctx context.Context, br *bufio.Reader, name string, a ReadArgs) (string, error) {
	first := max(a.Offset, 1)
	var (
		out     strings.Builder
		scanned int64
		lineNo  int
		shown   int
	)
	for {
		if lineNo%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return "", err
			}
		}
		// The budget makes the scan cap hold inside a line too: a file
		// that is one enormous line stops at the cap like any other.
		l, err := readCappedLine(ctx, br, w.lim.readLine, w.lim.readScan-scanned)
		if err != nil && !errors.Is(err, io.EOF) {
			if cerr := ctx.Err(); cerr != nil {
				return "", cerr
			}
			return "", fsError("read", name, err)
		}
		if l.consumed == 0 {
			break // end of file
		}
		scanned += l.consumed
		lineNo++
		if lineNo >= first {
			text := formatLine(lineNo, l)
			if shown > 0 && out.Len()+len(text) > w.lim.readOutput {
				fmt.Fprintf(&out, "[output cut at %s; continue with offset=%d]\n",
					sizeString(int64(w.lim.readOutput)), lineNo)
				return out.String(), nil
			}
			out.WriteString(text)
			shown++
			if shown == a.Limit && !l.unfinished {
				if _, err := br.Peek(1); err == nil {
					fmt.Fprintf(&out, "[more lines follow; continue with offset=%d]\n", lineNo+1)
				}
				return out.String(), nil
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if scanned >= w.lim.readScan {
			if _, err := br.Peek(1); err != nil {
				break // the cap fell exactly on the end of the file
			}
			if shown == 0 {
				return "", fmt.Errorf("read %s: line %d is beyond the first %s, which is as far as read goes; use grep to find what you need",
					name, first, sizeString(w.lim.readScan))
			}
			fmt.Fprintf(&out, "[stopped after the first %s of the file; read goes no further]\n", sizeString(w.lim.readScan))
			return out.String(), nil
		}
	}
	switch {
	case lineNo == 0:
		return fmt.Sprintf("[%s is empty]\n", name), nil
	case shown == 0:
		return "", fmt.Errorf("read %s: offset %d is past the end; the file has %s", name, first, plural(lineNo, "line"))
	}
	return out.String(), nil
}

func formatLine(n int, l cappedLine) string {
	s := strings.ToValidUTF8(string(l.text), "\uFFFD")
	switch {
	case l.unfinished:
		// How much of the line is left is unknown: read stopped inside it.
		return fmt.Sprintf("%6d\t%s … [line cut]\n", n, s)
	case l.dropped > 0:
		return fmt.Sprintf("%6d\t%s … [line cut: %s more]\n", n, s, sizeString(int64(l.dropped)))
	}
	return fmt.Sprintf("%6d\t%s\n", n, s)
}

// cappedLine is one line as readCappedLine returns it.
type cappedLine struct {
	text    []byte // the kept part, without the newline
	dropped int    // bytes of the line read but not kept, the newline not counted
	// consumed is every byte read, newline included; it is 0 only at the
	// end of the input.
	consumed int64
	// unfinished means the budget ran out inside the line: more of it
	// follows, unread.
	unfinished bool
}

// readCheckEvery is how many bytes of one line readCappedLine reads between
// looks at ctx, so that /stop ends the read of an endless line (a sparse
// file, a slow network mount) promptly.
const readCheckEvery = 1 << 20

// readCappedLine reads one line from br, keeping at most keep bytes of it
// and counting the rest in dropped, so one enormous line costs no memory.
// It stops once budget bytes are consumed even if the line goes on (one
// bufio buffer past budget at most), and returns ctx's error if ctx is done
// while it reads. A kept part that ends in the middle of a rune is
// shortened to the rune start.
func readCappedLine(ctx context.Context, br *bufio.Reader, keep int, budget int64) (cappedLine, error) {
	var (
		l       cappedLine
		last    []byte
		err     error
		checked int64
	)
	for {
		var frag []byte
		frag, err = br.ReadSlice('\n')
		l.consumed += int64(len(frag))
		take := min(keep-len(l.text), len(frag))
		l.text = append(l.text, frag[:take]...)
		l.dropped += len(frag) - take
		if len(frag) > 0 {
			last = frag
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			break
		}
		err = nil
		if l.consumed >= budget {
			l.unfinished, err = lineGoesOn(br)
			if err != nil && !errors.Is(err, io.EOF) {
				return cappedLine{}, err
			}
			break
		}
		if l.consumed-checked >= readCheckEvery {
			checked = l.consumed
			if err := ctx.Err(); err != nil {
				return cappedLine{}, err
			}
		}
	}
	if len(last) > 0 && last[len(last)-1] == '\n' {
		if l.dropped > 0 {
			l.dropped--
		} else {
			l.text = l.text[:len(l.text)-1]
		}
	}
	if l.dropped > 0 || l.unfinished {
		l.text = trimPartialRune(l.text, &l.dropped)
	}
	return l, err
}

// lineGoesOn reports whether the line br stopped in has more than its
// newline left; io.EOF means the line ended with the input.
func lineGoesOn(br *bufio.Reader) (bool, error) {
	b, err := br.Peek(1)
	if err != nil {
		return false, err
	}
	return b[0] != '\n', nil
}

// trimPartialRune shortens line to the start of a rune its end cuts,
// adding the bytes taken off to dropped.
func trimPartialRune(line []byte, dropped *int) []byte {
	cut := len(line)
	for i := len(line) - 1; i >= 0 && i >= len(line)-utf8.UTFMax; i-- {
		if utf8.RuneStart(line[i]) {
			if !utf8.FullRune(line[i:]) {
				cut = i
			}
			break
		}
	}
	*dropped += len(line) - cut
	return line[:cut]
}

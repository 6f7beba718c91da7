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
		line, dropped, n, err := readCappedLine(br, w.lim.readLine)
		if err != nil && !errors.Is(err, io.EOF) {
			return "", fsError("read", name, err)
		}
		if n == 0 {
			break // end of file
		}
		scanned += n
		lineNo++
		if lineNo >= first {
			text := formatLine(lineNo, line, dropped)
			if shown > 0 && out.Len()+len(text) > w.lim.readOutput {
				fmt.Fprintf(&out, "[output cut at %s; continue with offset=%d]\n",
					sizeString(int64(w.lim.readOutput)), lineNo)
				return out.String(), nil
			}
			out.WriteString(text)
			shown++
			if shown == a.Limit {
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

func formatLine(n int, line []byte, dropped int) string {
	s := strings.ToValidUTF8(string(line), "\uFFFD")
	if dropped > 0 {
		return fmt.Sprintf("%6d\t%s … [line cut: %s more]\n", n, s, sizeString(int64(dropped)))
	}
	return fmt.Sprintf("%6d\t%s\n", n, s)
}

// readCappedLine reads one line from br, keeping at most keep bytes of it
// and counting the rest in dropped, so one enormous line costs no memory.
// consumed is every byte read, newline included; it is 0 only at the end of
// the input. The newline is not returned and not counted in dropped. A kept
// part that ends in the middle of a rune is shortened to the rune start.
func readCappedLine(br *bufio.Reader, keep int) (line []byte, dropped int, consumed int64, err error) {
	var last []byte
	for {
		var frag []byte
		frag, err = br.ReadSlice('\n')
		consumed += int64(len(frag))
		take := min(keep-len(line), len(frag))
		line = append(line, frag[:take]...)
		dropped += len(frag) - take
		if len(frag) > 0 {
			last = frag
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			break
		}
	}
	if len(last) > 0 && last[len(last)-1] == '\n' {
		if dropped > 0 {
			dropped--
		} else {
			line = line[:len(line)-1]
		}
	}
	if dropped > 0 {
		cut := len(line)
		for i := len(line) - 1; i >= 0 && i >= len(line)-utf8.UTFMax; i-- {
			if utf8.RuneStart(line[i]) {
				if !utf8.FullRune(line[i:]) {
					cut = i
				}
				break
			}
		}
		dropped += len(line) - cut
		line = line[:cut]
	}
	return line, dropped, consumed, err
}

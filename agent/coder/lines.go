package coder

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"log/slog"
)

// readLines sends each line of r, without its line ending, to out until r
// ends or stop closes, then closes out. A line longer than max is dropped
// as it is read, never held whole; blank lines are skipped.
func readLines(r io.Reader, max int, out chan<- []byte, stop <-chan struct{}, log *slog.Logger) {
	defer close(out)
	br := bufio.NewReaderSize(r, 64<<10)
	var line []byte
	skipping := false
	for {
		chunk, err := br.ReadSlice('\n')
		switch {
		case skipping:
		case len(line)+len(chunk) > max:
			log.Warn("skipped an event line longer than the limit", "limit", max)
			skipping, line = true, nil
		default:
			line = append(line, chunk...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if l := bytes.TrimSpace(line); len(l) > 0 {
			select {
			case out <- l:
			case <-stop:
				return
			}
		}
		line, skipping = nil, false
		if err != nil {
			return
		}
	}
}

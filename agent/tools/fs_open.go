package tools

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// ErrTooLarge is returned by ReadAll for a file over the caller's limit.
var ErrTooLarge = errors.New("file too large")

// ReadAll reads a whole regular file of the workspace through the root, up
// to max bytes; send_file uses it to hand a file to the chat.
func (w *Workspace) ReadAll(path string, max int64) (name string, data []byte, err error) {
	rel, err := w.rel(path)
	if err != nil {
		return "", nil, err
	}
	// O_NONBLOCK: a FIFO planted in the workspace (AGENTS.md, which every
	// model call reads, or a file to send) would block a plain open until
	// a writer came, past any cancellation. The Stat below refuses it.
	f, err := w.root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return "", nil, fsError("open", rel, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", nil, fsError("open", rel, err)
	}
	if !fi.Mode().IsRegular() {
		return "", nil, fmt.Errorf("%s is not a regular file", rel)
	}
	if fi.Size() > max {
		return "", nil, fmt.Errorf("%s is %d bytes, over the %d-byte limit: %w", rel, fi.Size(), max, ErrTooLarge)
	}
	data, err = io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return "", nil, fsError("read", rel, err)
	}
	if int64(len(data)) > max {
		return "", nil, fmt.Errorf("%s grew over the %d-byte limit: %w", rel, max, ErrTooLarge)
	}
	return fi.Name(), data, nil
}

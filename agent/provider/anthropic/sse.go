package anthropic

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// maxEvent bounds one server-sent event (its data and the line being
// read). A 200 KB tool input arrives in a single line, so lines must not be
// capped at bufio.Scanner's 64 KiB; but a stream that never ends a line
// must not take all the memory either.
const maxEvent = 32 << 20

var errEventTooLarge = errors.New("an event of the stream is larger than 32 MiB")

// sseEvent is one server-sent event.
type sseEvent struct {
	name string // the event field; "" when the event had none
	data []byte // the data lines, joined by "\n"
}

// sseReader reads server-sent events as the HTML standard defines them:
// lines end in LF, CRLF or a lone CR; "field: value" lines (the space is
// optional) add to the event being built; a line starting with ':' is a
// comment; a blank line dispatches the event, if it has data; data lines
// are joined with "\n"; an event cut off by the end of the stream is
// dropped. Only the event and data fields matter here.
type sseReader struct {
	r       *bufio.Reader
	line    []byte
	name    string
	data    []byte
	skipLF  bool // the last line ended in CR: an LF right after it is part of that line end
	started bool // the first line has been read (it may start with a BOM)
}

func newSSEReader(r io.Reader) *sseReader {
	return &sseReader{r: bufio.NewReaderSize(r, 64<<10)}
}

var bom = []byte("\xEF\xBB\xBF")

// next returns the next event. At the end of the stream it returns io.EOF
// (or the read error that ended it), whether or not an event was cut off.
func (s *sseReader) next() (sseEvent, error) {
	for {
		line, err := s.readLine()
		if err != nil {
			return sseEvent{}, err
		}
		if !s.started {
			s.started = true
			line = bytes.TrimPrefix(line, bom)
		}
		if len(line) == 0 {
			if len(s.data) == 0 {
				// No data: nothing to dispatch.
				s.name = ""
				continue
			}
			ev := sseEvent{name: s.name, data: s.data[:len(s.data)-1]}
			s.name, s.data = "", nil
			return ev, nil
		}
		if line[0] == ':' {
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "event":
			s.name = string(value)
		case "data":
			s.data = append(append(s.data, value...), '\n')
		}
		// id and retry concern reconnecting, which a Messages stream
		// cannot do; the standard says to ignore other fields.
	}
}

// readLine returns the next line without its line end. The slice is valid
// until the next call.
func (s *sseReader) readLine() ([]byte, error) {
	s.line = s.line[:0]
	for {
		buf, err := s.buffered()
		if err != nil {
			// A line the stream did not end is part of an event that
			// was cut off.
			return nil, err
		}
		if s.skipLF {
			s.skipLF = false
			if buf[0] == '\n' {
				_, _ = s.r.Discard(1)
				continue
			}
		}
		i := bytes.IndexAny(buf, "\r\n")
		if i < 0 {
			s.line = append(s.line, buf...)
			_, _ = s.r.Discard(len(buf))
		} else {
			s.line = append(s.line, buf[:i]...)
			s.skipLF = buf[i] == '\r'
			_, _ = s.r.Discard(i + 1)
		}
		if len(s.line)+len(s.data) > maxEvent {
			return nil, errEventTooLarge
		}
		if i >= 0 {
			return s.line, nil
		}
	}
}

// buffered returns what the reader holds, reading more if it holds
// nothing; it is never empty without an error.
func (s *sseReader) buffered() ([]byte, error) {
	if s.r.Buffered() == 0 {
		if _, err := s.r.Peek(1); err != nil {
			return nil, err
		}
	}
	return s.r.Peek(s.r.Buffered())
}

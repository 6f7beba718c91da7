package anthropic

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// readAll reads events until the end of the stream.
func readAll(t *testing.T, r io.Reader) ([]sseEvent, error) {
	t.Helper()
	s := newSSEReader(r)
	var out []sseEvent
	for {
		ev, err := s.next()
		if err != nil {
			return out, err
		}
		out = append(out, ev)
	}
}

func TestSSEReader(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 200_000)
	tests := []struct {
		name   string
		stream string
		want   []sseEvent // name, data
	}{
		{"lf", "event: a\ndata: 1\n\nevent: b\ndata: 2\n\n", []sseEvent{{"a", []byte("1")}, {"b", []byte("2")}}},
		{"crlf", "event: a\r\ndata: 1\r\n\r\nevent: b\r\ndata: 2\r\n\r\n", []sseEvent{{"a", []byte("1")}, {"b", []byte("2")}}},
		{"lone cr", "event: a\rdata: 1\r\revent: b\rdata: 2\r\r", []sseEvent{{"a", []byte("1")}, {"b", []byte("2")}}},
		{"mixed", "event: a\r\ndata: 1\n\revent: b\rdata: 2\r\n\n", []sseEvent{{"a", []byte("1")}, {"b", []byte("2")}}},
		{"bom", "\xEF\xBB\xBFevent: a\ndata: 1\n\n", []sseEvent{{"a", []byte("1")}}},
		{"no space", "event:a\ndata:1\n\n", []sseEvent{{"a", []byte("1")}}},
		{"two spaces keep one", "data:  1\n\n", []sseEvent{{"", []byte(" 1")}}},
		{"multi-line data", "event: a\ndata: {\"x\":\ndata: 1}\n\n", []sseEvent{{"a", []byte("{\"x\":\n1}")}}},
		{"empty data", "event: a\ndata\n\n", []sseEvent{{"a", []byte("")}}},
		{"comments and other fields", ": hi\nid: 3\nretry: 10\nfoo: bar\nevent: a\n: mid\ndata: 1\n\n", []sseEvent{{"a", []byte("1")}}},
		{"no data is not dispatched", "event: a\n\nevent: b\n\n\n\ndata: 1\n\n", []sseEvent{{"", []byte("1")}}},
		{"cut event is dropped", "data: 1\n\ndata: 2\n", []sseEvent{{"", []byte("1")}}},
		{"cut line is dropped", "data: 1\n\ndata: 2", []sseEvent{{"", []byte("1")}}},
		{"200 KB line", "event: a\ndata: " + big + "\n\n", []sseEvent{{"a", []byte(big)}}},
	}
	readers := map[string]func(string) io.Reader{
		"whole":    func(s string) io.Reader { return strings.NewReader(s) },
		"one byte": func(s string) io.Reader { return iotest.OneByteReader(strings.NewReader(s)) },
		"half":     func(s string) io.Reader { return iotest.HalfReader(strings.NewReader(s)) },
		"data+eof": func(s string) io.Reader { return iotest.DataErrReader(strings.NewReader(s)) },
	}
	for _, tt := range tests {
		for rname, mk := range readers {
			t.Run(tt.name+"/"+rname, func(t *testing.T) {
				got, err := readAll(t, mk(tt.stream))
				if !errors.Is(err, io.EOF) {
					t.Errorf("ended with %v, want io.EOF", err)
				}
				if len(got) != len(tt.want) {
					t.Fatalf("got %d events %q, want %d %q", len(got), got, len(tt.want), tt.want)
				}
				for i := range got {
					if got[i].name != tt.want[i].name || string(got[i].data) != string(tt.want[i].data) {
						t.Errorf("event %d = %q %.40q, want %q %.40q", i, got[i].name, got[i].data, tt.want[i].name, tt.want[i].data)
					}
				}
			})
		}
	}
}

// endless is a line that never ends.
type endless struct{}

func (endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'a'
	}
	return len(p), nil
}

func TestSSEReaderBoundsAnEvent(t *testing.T) {
	t.Parallel()
	_, err := readAll(t, io.MultiReader(strings.NewReader("data: "), endless{}))
	if !errors.Is(err, errEventTooLarge) {
		t.Fatalf("err = %v, want errEventTooLarge", err)
	}
	// Many data lines add up the same way.
	_, err = readAll(t, io.MultiReader(strings.NewReader("data: "), strings.NewReader(strings.Repeat("data: "+strings.Repeat("b", 1<<20)+"\n", 40))))
	if !errors.Is(err, errEventTooLarge) {
		t.Fatalf("err = %v, want errEventTooLarge", err)
	}
}

func TestSSEReaderPassesReadErrors(t *testing.T) {
	t.Parallel()
	_, err := readAll(t, io.MultiReader(strings.NewReader("data: 1\n\ndata: 2"), iotest.ErrReader(io.ErrUnexpectedEOF)))
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("err = %v, want io.ErrUnexpectedEOF", err)
	}
}

// FuzzStream: whatever a server sends, reading it never panics.
func FuzzStream(f *testing.F) {
	f.Add([]byte("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"content\":[],\"usage\":{\"input_tokens\":1}}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"n\",\"input\":{}}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"a\\\"\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":-1,\"delta\":{\"type\":\"text_delta\",\"text\":\"x\"}}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":2}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"))
	f.Add([]byte("data: {\"type\":\"error\",\"error\":null}\r\r: x\rdata\n\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s := newSSEReader(strings.NewReader(string(b)))
		var r reply
		for {
			ev, err := s.next()
			if err != nil {
				break
			}
			done, err := r.apply(ev, func(string) {})
			if err != nil || done {
				break
			}
		}
		_ = r.complete()
		_ = r.partial()
	})
}

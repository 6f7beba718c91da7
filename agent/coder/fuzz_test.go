package coder

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/latchd/latch/agent"
)

// seedLines adds every line of the recorded streams and some broken ones.
func seedLines(f *testing.F, prefix string) {
	files, _ := filepath.Glob(filepath.Join("testdata", prefix+"*.jsonl"))
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		for line := range bytes.Lines(raw) {
			f.Add(bytes.TrimSpace(line))
		}
	}
	for _, s := range []string{"", "{", "null", "[]", `{"type":1}`, `{"type":"result","usage":null}`,
		`{"type":"control_request","request_id":"x","request":{"subtype":"can_use_tool","input":[]}}`,
		`{"type":"control_request","request_id":"x","request":{"subtype":"hook_callback","input":"str"}}`,
		`{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"a","content":[{"type":"text","text":"e"}],"is_error":true}]}}`,
		`{"type":"item.completed","item":{"id":"i","type":"command_execution","exit_code":"x"}}`,
		`{"type":"turn.failed","error":null}`, `{"type":"brand.new","x":{}}`, strings.Repeat("[", 10000)} {
		f.Add([]byte(s))
	}
}

// FuzzClaudeLine: no line of Claude Code's output makes the decoder panic,
// and what it writes back is JSON lines.
func FuzzClaudeLine(f *testing.F) {
	seedLines(f, "claude")
	f.Fuzz(func(t *testing.T, line []byte) {
		policy := agent.DefaultPolicy()
		tr, _, in := replayTurn(t, &ClaudeCode{Policy: policy}, policy)
		s := &claudeStream{c: &ClaudeCode{Policy: policy}, t: tr}
		if err := s.Line(line); err != nil {
			t.Fatal(err)
		}
		tr.expire(time.Now().Add(2 * tr.b.cfg.ApprovalTimeout))
		sent(t, in)
	})
}

// FuzzCodexLine: no line of Codex's output makes the decoder panic.
func FuzzCodexLine(f *testing.F) {
	seedLines(f, "codex")
	f.Fuzz(func(t *testing.T, line []byte) {
		tr, _, _ := replayTurn(t, &Codex{}, agent.DefaultPolicy())
		if err := (&codexStream{t: tr}).Line(line); err != nil {
			t.Fatal(err)
		}
	})
}

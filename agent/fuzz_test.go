package agent

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/latchd/latch/agent/tools"
)

// FuzzToolArguments: arguments come from the model and are hostile. No
// input makes a tool panic or act outside the workspace, and the one-line
// summary never panics.
func FuzzToolArguments(f *testing.F) {
	seeds := []string{`{}`, `{"path":"../x"}`, `{"path":"/etc/passwd"}`, `{"pattern":"**"}`, `{"path":"a","content":"b"}`,
		`{"path":"a","old":"","new":"x"}`, `{"pattern":"(","path":"."}`, `null`, `[]`, `"x"`, `{"path":1}`, `{"unknown":true}`}
	names := []string{ToolRead, ToolWrite, ToolEdit, ToolList, ToolGrep, ToolSendFile}
	for i, s := range seeds {
		f.Add(uint8(i), s)
	}
	dir := f.TempDir()
	ws := filepath.Join(dir, "ws")
	os.Mkdir(ws, 0o700)
	os.WriteFile(filepath.Join(ws, "a"), []byte("hello\n"), 0o600)
	outside := filepath.Join(dir, "outside")
	os.WriteFile(outside, []byte("secret"), 0o600)
	w, err := tools.OpenWorkspace(ws)
	if err != nil {
		f.Fatal(err)
	}
	defer w.Close()
	tb := &Toolbox{Workspace: w}
	f.Fuzz(func(t *testing.T, which uint8, input string) {
		name := names[int(which)%len(names)]
		Summary(name, json.RawMessage(input))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		out, file, _ := tb.run(ctx, name, json.RawMessage(input))
		if b, _ := os.ReadFile(outside); string(b) != "secret" {
			t.Fatalf("%s(%s) changed a file outside the workspace", name, input)
		}
		if file != nil && string(file.Data) == "secret" || len(out) > 0 && containsSecret(out) {
			t.Fatalf("%s(%s) read outside the workspace", name, input)
		}
	})
}

func containsSecret(s string) bool {
	for i := 0; i+6 <= len(s); i++ {
		if s[i:i+6] == "secret" {
			return true
		}
	}
	return false
}

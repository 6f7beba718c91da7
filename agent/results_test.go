package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/latchd/latch/agent/provider"
	"github.com/latchd/latch/agent/provider/anthropic/anthropictest"
	"github.com/latchd/latch/store"
	bolt "go.etcd.io/bbolt"
)

// bashStep is chat's session with a step added, its calls not yet run:
// the user asking to "go" and the model's answer calling bash with each of
// commands, as toolu_1, toolu_2, ….
func (f *fixture) bashStep(commands ...string) *session {
	var calls []provider.Block
	for i, c := range commands {
		input, _ := json.Marshal(map[string]string{"command": c})
		calls = append(calls, provider.Block{Type: provider.BlockToolUse, ID: fmt.Sprintf("toolu_%d", i+1), Name: ToolBash, Input: input})
	}
	s, _ := f.agent.load(chat)
	s.Messages = append(s.Messages, userMsg("go"), provider.Message{Role: provider.RoleAssistant, Content: calls})
	return s
}

// manyReads is one answer calling read_file n times on big.txt, a file of
// about 30 KiB, so each result is about that size.
func manyReads(t *testing.T, f *fixture, n int) anthropictest.Reply {
	t.Helper()
	line := strings.Repeat("x", 1900) + "\n"
	if err := os.WriteFile(filepath.Join(f.ws, "big.txt"), []byte(strings.Repeat(line, 16)), 0o600); err != nil {
		t.Fatal(err)
	}
	var r anthropictest.Reply
	for i := range n {
		r = r.AndToolUse(fmt.Sprintf("toolu_%d", i), ToolRead, `{"path":"big.txt"}`)
	}
	return r
}

// TestStepResultWritesAreLinear: each finished call's result is saved
// before the next call starts, and a step of n calls writes each result
// about once — not the step's results so far on every save, which made a
// step of many large results (bash keeps 64 KiB, fetch 100 KiB) write the
// square of its output to the store.
func TestStepResultWritesAreLinear(t *testing.T) {
	perResult := map[int]int64{}
	for _, n := range []int{4, 16} {
		f := newFixture(t, nil)
		f.fake.Script(manyReads(t, f, n), anthropictest.Text("read"))
		before := pageBytes(f.db)
		ev := &recorder{}
		if err := f.turn(t, "read it", ev); err != nil {
			t.Fatal(err)
		}
		if len(ev.finished) != n {
			t.Fatalf("%d calls finished, want %d", len(ev.finished), n)
		}
		perResult[n] = (pageBytes(f.db) - before) / int64(n)
	}
	t.Logf("page bytes written per 30 KiB result: %d in a step of 4, %d in a step of 16", perResult[4], perResult[16])
	// Linear: a result costs the same in a long step as in a short one (a
	// little less, as the turn's fixed cost is shared). Quadratic: four
	// times as much.
	if perResult[16] > perResult[4]*3/2 {
		t.Errorf("a result cost %d bytes in a step of 16 but %d in a step of 4: writes grow with the step", perResult[16], perResult[4])
	}
}

// stepStore is what the store holds of key's current step: the result
// records, in order, as "id=text", and whether the meta record still
// carries results the old way.
func stepStore(t *testing.T, db *store.DB, key SessionKey) (records []string, inMeta bool) {
	t.Helper()
	err := db.View(func(tx *store.Tx) error {
		info, _, err := tx.Session(key.String())
		if err != nil {
			return err
		}
		var m map[string]json.RawMessage
		if len(info.Meta) > 0 {
			if err := json.Unmarshal(info.Meta, &m); err != nil {
				return err
			}
		}
		_, inMeta = m["results"]
		return tx.SessionResults(key.String(), func(raw []byte) bool {
			var r provider.Block
			json.Unmarshal(raw, &r)
			records = append(records, r.ID+"="+r.Text)
			return true
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return records, inMeta
}

// storeOldStep stores key as latch did before results had records of their
// own: a step of two bash calls, both recorded as started, the first
// finished with its result inside the meta record, the second cut.
func storeOldStep(t *testing.T, db *store.DB, key SessionKey) {
	t.Helper()
	msgs := []provider.Message{userMsg("deploy"), {Role: provider.RoleAssistant, Content: []provider.Block{
		{Type: provider.BlockToolUse, ID: "toolu_1", Name: ToolBash, Input: json.RawMessage(`{"command":"echo deployed >> log; echo first done"}`)},
		{Type: provider.BlockToolUse, ID: "toolu_2", Name: ToolBash, Input: json.RawMessage(`{"command":"echo second >> log"}`)},
	}}}
	raw, kept, err := encodeMessages(msgs)
	if err != nil {
		t.Fatal(err)
	}
	// What the old metaRecord wrote: json.Marshal of sessionMeta with
	// Results.
	meta := fmt.Sprintf(`{"started":"2026-01-02T03:04:05Z","running":["toolu_1","toolu_2"],`+
		`"results":[{"Type":"tool_result","Text":"first done\n","ID":"toolu_1","Name":"","Input":null,"IsError":false}],`+
		`"kept":%d,"gen":"00000000000000aa"}`, kept)
	err = db.Update(func(tx *store.Tx) error { _, err := tx.AppendSession(key.String(), []byte(meta), raw...); return err })
	if err != nil {
		t.Fatal(err)
	}
}

// TestOldFormatResultsResume: a session stored by a latch that kept the
// step's results inside the meta record still resumes with them — the
// finished call is not run again and the model gets its real output —
// whether it is resumed at once or first saved by this latch, which moves
// the results to records of their own.
func TestOldFormatResultsResume(t *testing.T) {
	for _, convert := range []bool{false, true} {
		t.Run(map[bool]string{false: "resumed as stored", true: "converted by a save"}[convert], func(t *testing.T) {
			f := newFixture(t, func(c *Config) { c.Policy = Policy{ToolBash: Allow} })
			os.WriteFile(filepath.Join(f.ws, "log"), []byte("deployed\n"), 0o600)
			storeOldStep(t, f.db, chat)
			s, err := New(f.cfg).load(chat)
			if err != nil {
				t.Fatal(err)
			}
			if len(s.Results) != 1 || s.Results[0].ID != "toolu_1" || s.Results[0].Text != "first done\n" {
				t.Fatalf("loaded results %+v, want the one in the old meta record", s.Results)
			}
			if convert {
				if err := New(f.cfg).save(chat, s); err != nil {
					t.Fatal(err)
				}
				records, inMeta := stepStore(t, f.db, chat)
				if inMeta || strings.Join(records, "|") != "toolu_1=first done\n" {
					t.Errorf("after a save: records %q, results in meta %v; want the result moved to a record", records, inMeta)
				}
			}

			f.fake.Script(anthropictest.Text("Deployed."))
			resumed := &recorder{}
			if err := New(f.cfg).Resume(context.Background(), chat, resumed); err != nil {
				t.Fatal(err)
			}
			if len(resumed.started) != 0 {
				t.Errorf("the resumed step ran %q", resumed.started)
			}
			if b, _ := os.ReadFile(filepath.Join(f.ws, "log")); string(b) != "deployed\n" {
				t.Errorf("log = %q, want one deploy", b)
			}
			msgs := f.fake.Requests()[0].Params.Messages
			got := map[string]string{}
			for _, c := range msgs[len(msgs)-1].Content {
				got[c.ToolUseID] = c.ResultText()
			}
			if got["toolu_1"] != "first done\n" || got["toolu_2"] != noteInterrupted {
				t.Errorf("results sent after the restart = %q", got)
			}
			if records, inMeta := stepStore(t, f.db, chat); len(records) != 0 || inMeta {
				t.Errorf("after the step: records %q, results in meta %v; want none", records, inMeta)
			}
		})
	}
}

// TestNewTurnDropsTheOldStepsResults: a new turn after a cut step that was
// not resumed deletes that step's result records in its first save. A
// record left behind would be read, after a crash in the new step, as the
// result of the new call with the same id (call_0 … for servers that send
// none): here a call the output limit cut would pass for finished.
func TestNewTurnDropsTheOldStepsResults(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Policy = Policy{ToolBash: Allow} })
	s, _ := f.agent.load(chat)
	s.Messages = append(s.Messages, userMsg("first"), provider.Message{Role: provider.RoleAssistant, Content: []provider.Block{
		{Type: provider.BlockToolUse, ID: "call_0", Name: ToolBash, Input: []byte(`{"command":"make"}`)},
	}})
	s.Running = []string{"call_0"}
	s.Results = []provider.Block{{Type: provider.BlockToolResult, ID: "call_0", Text: "built"}}
	if err := f.agent.save(chat, s); err != nil {
		t.Fatal(err)
	}

	f.fake.Script(anthropictest.ToolUse("call_1", ToolBash, `{"command":"sleep 60"}`).
		AndToolUse("call_0", ToolBash, `{"command":"touch ran`).StopReason("max_tokens"))
	crashed, err := crashInFirstCall(t, f, "second")
	if !errors.Is(err, ErrShutdown) {
		t.Fatalf("turn = %v, want ErrShutdown", err)
	}
	if records, _ := stepStore(t, crashed.Store, chat); strings.Join(records, "|") != "call_0="+noteCutOff {
		t.Errorf("records of the new step = %q, want only its cut call's", records)
	}

	f.fake.Script(anthropictest.Text("ok"))
	if err := New(crashed).Resume(context.Background(), chat, &recorder{}); err != nil {
		t.Fatal(err)
	}
	if r := storedResults(t, crashed, chat)["call_0"]; r.Text != noteCutOff {
		t.Errorf("the new step's cut call_0 ended with %+v, want %q", r, noteCutOff)
	}
}

// TestResetLeavesNoResults: /new in the middle of a step deletes the
// step's result records with the conversation; nothing is left for the
// next conversation to read.
func TestResetLeavesNoResults(t *testing.T) {
	f := newFixture(t, nil)
	s := f.bashStep("a")
	s.Results = []provider.Block{{Type: provider.BlockToolResult, ID: "toolu_1", Text: "done"}}
	if err := f.agent.save(chat, s); err != nil {
		t.Fatal(err)
	}
	if err := New(f.cfg).Reset(chat); err != nil {
		t.Fatal(err)
	}
	f.db.Bolt().View(func(tx *bolt.Tx) error {
		if c := tx.Bucket([]byte("sessions")).Cursor(); c != nil {
			if k, _ := c.First(); k != nil {
				t.Errorf("the store still holds %q after /new", k)
			}
		}
		return nil
	})
	if s, _ := New(f.cfg).load(chat); len(s.Results) != 0 {
		t.Errorf("results after /new: %+v", s.Results)
	}
}

// TestReplacedSessionKeepsTheStepsResults: a turn whose conversation was
// deleted or replaced while it ran stores what it holds afresh, as before
// results had records of their own: all of its step's results, not only
// those that ended since its last save.
func TestReplacedSessionKeepsTheStepsResults(t *testing.T) {
	f := newFixture(t, nil)
	s := f.bashStep("a", "b")
	s.Results = []provider.Block{{Type: provider.BlockToolResult, ID: "toolu_1", Text: "one"}}
	if err := f.agent.save(chat, s); err != nil {
		t.Fatal(err)
	}
	if err := New(f.cfg).Reset(chat); err != nil {
		t.Fatal(err)
	}
	s.Results = append(s.Results, provider.Block{Type: provider.BlockToolResult, ID: "toolu_2", Text: "two"})
	if err := f.agent.save(chat, s); err != nil {
		t.Fatal(err)
	}
	if records, _ := stepStore(t, f.db, chat); strings.Join(records, "|") != "toolu_1=one|toolu_2=two" {
		t.Errorf("records after the conversation was stored afresh = %q, want both results", records)
	}
}

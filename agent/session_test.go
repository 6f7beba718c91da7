package agent

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/latchd/latch/agent/provider"
	"github.com/latchd/latch/agent/provider/anthropic/anthropictest"
	"github.com/latchd/latch/store"
	bolt "go.etcd.io/bbolt"
)

func userMsg(text string) provider.Message {
	return provider.Message{Role: provider.RoleUser, Content: []provider.Block{{Type: provider.BlockText, Text: text}}}
}

func assistantMsg(text string) provider.Message {
	return provider.Message{Role: provider.RoleAssistant, Content: []provider.Block{{Type: provider.BlockText, Text: text}}}
}

// history is n turns of varied sizes; every third calls a tool, so tool
// pairs sit inside turns.
func history(n int) []provider.Message {
	var msgs []provider.Message
	for i := range n {
		msgs = append(msgs, userMsg(fmt.Sprintf("question %d %s", i, strings.Repeat("q", (i*37)%300))))
		if i%3 == 0 {
			id := fmt.Sprintf("toolu_%d", i)
			msgs = append(msgs,
				provider.Message{Role: provider.RoleAssistant, Content: []provider.Block{{Type: provider.BlockToolUse, ID: id, Name: ToolList, Input: json.RawMessage(`{}`)}}},
				provider.Message{Role: provider.RoleUser, Content: []provider.Block{{Type: provider.BlockToolResult, ID: id, Text: strings.Repeat("r", (i*53)%500)}}})
		}
		msgs = append(msgs, assistantMsg(fmt.Sprintf("answer %d %s", i, strings.Repeat("a", (i*91)%400))))
	}
	return msgs
}

// roundTrip is msgs as they read back from the store (a text block's nil
// Input comes back as "null", which approxTokens counts).
func roundTrip(t *testing.T, msgs []provider.Message) []provider.Message {
	t.Helper()
	raw, err := json.Marshal(msgs)
	if err != nil {
		t.Fatal(err)
	}
	var out []provider.Message
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func storeHistory(t *testing.T, a *Agent, msgs []provider.Message) {
	t.Helper()
	s, err := a.load(chat)
	if err != nil {
		t.Fatal(err)
	}
	s.Messages = append(s.Messages, msgs...)
	if err := a.save(chat, s); err != nil {
		t.Fatal(err)
	}
}

func sameMessages(t *testing.T, what string, got, want []provider.Message) {
	t.Helper()
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if string(g) != string(w) {
		t.Errorf("%s: got %d messages, want %d:\n got  %.300s\n want %.300s", what, len(got), len(want), g, w)
	}
}

// TestLoadReadsWhatTrimSends: loading reads only the tail of the stored
// history, and that tail is exactly what trimmed would send from the whole
// history — tool pairs unsplit, a turn start first — for any budget.
func TestLoadReadsWhatTrimSends(t *testing.T) {
	f := newFixture(t, nil)
	all := roundTrip(t, history(60))
	storeHistory(t, f.agent, all)
	total := 0
	for _, m := range all {
		total += approxTokens(m)
	}
	for _, budget := range []int{1, 10, 50, 100, 333, 1000, 2500, total - 1, total, total + 1} {
		cfg := f.cfg
		cfg.ContextBudget = budget
		s, err := New(cfg).load(chat)
		if err != nil {
			t.Fatal(err)
		}
		want := trimmed(all, budget)
		sameMessages(t, fmt.Sprintf("budget %d", budget), s.Messages, want)
		if got, want := s.first, uint64(len(all)-len(want)+1); got != want {
			t.Errorf("budget %d: first = %d, want %d", budget, got, want)
		}
		if len(s.Messages) > 0 && !isTurnStart(s.Messages[0]) && len(s.Messages) != len(all) {
			t.Errorf("budget %d: the tail starts inside a turn: %+v", budget, s.Messages[0])
		}
	}
	// Only the tail is read: damage to the oldest message shows only when
	// it is needed.
	err := f.db.Bolt().Update(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("sessions")).Bucket([]byte(chat.String())).Bucket([]byte("log")).Put(binary.BigEndian.AppendUint64(nil, 1), []byte("{damaged"))
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg := f.cfg
	cfg.ContextBudget = 1000
	if _, err := New(cfg).load(chat); err != nil {
		t.Errorf("a load that needs only the tail read the oldest message: %v", err)
	}
	cfg.ContextBudget = total
	if _, err := New(cfg).load(chat); err == nil {
		t.Error("a damaged message in the part to send was skipped silently")
	}
}

// TestLegacySessionLoadsAndConverts: a conversation stored by schema 1 —
// one JSON value under its key — is read whole, sent to the model, and
// rewritten in the append-only layout by the first save.
func TestLegacySessionLoadsAndConverts(t *testing.T) {
	f := newFixture(t, nil)
	today := time.Now().UTC().Format(time.DateOnly)
	// What the old save wrote: json.Marshal of the whole session.
	legacy := fmt.Sprintf(`{"messages":[`+
		`{"Role":"user","Content":[{"Type":"text","Text":"my name is Ada","ID":"","Name":"","Input":null,"IsError":false}]},`+
		`{"Role":"assistant","Content":[{"Type":"text","Text":"Hello Ada.","ID":"","Name":"","Input":null,"IsError":false}]}],`+
		`"started":"2026-01-02T03:04:05Z","tokens":{%q:42}}`, today)
	err := f.db.Bolt().Update(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("sessions")).Put([]byte(chat.String()), []byte(legacy))
	})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := f.agent.Status(chat); err != nil || st.Messages != 2 || st.TokensToday != 42 {
		t.Fatalf("status of the old session = %+v, %v", st, err)
	}
	f.fake.Script(anthropictest.Text("Your name is Ada.").Usage(5, 3))
	if err := f.turn(t, "what is my name?", &recorder{}); err != nil {
		t.Fatal(err)
	}
	body := string(f.fake.Requests()[0].Body)
	if !strings.Contains(body, "my name is Ada") || !strings.Contains(body, "Hello Ada.") {
		t.Errorf("the old history was not sent: %s", body)
	}
	f.db.View(func(tx *store.Tx) error {
		if raw, _ := tx.LegacySession(chat.String()); raw != nil {
			t.Errorf("still stored the old way: %s", raw)
		}
		info, found, err := tx.Session(chat.String())
		if err != nil || !found || info.First != 1 || info.Next != 5 {
			t.Errorf("converted session = %+v, %v, %v; want messages 1-4", info, found, err)
		}
		return nil
	})
	s, err := New(f.cfg).load(chat)
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, m := range s.Messages {
		texts = append(texts, m.Content[0].Text)
	}
	if got, want := strings.Join(texts, "|"), "my name is Ada|Hello Ada.|what is my name?|Your name is Ada."; got != want {
		t.Errorf("history = %q, want %q", got, want)
	}
	if want := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC); !s.Started.Equal(want) || s.Tokens[today] != 50 {
		t.Errorf("meta after conversion: started %v, tokens %v", s.Started, s.Tokens)
	}
	if st, _ := f.agent.Status(chat); st.Messages != 4 {
		t.Errorf("status after conversion = %+v", st)
	}
}

// pageBytes is what the store has written to pages so far.
func pageBytes(db *store.DB) int64 {
	st := db.Bolt().Stats()
	return st.TxStats.GetPageAlloc()
}

// TestStepWritesDoNotGrowWithTheSession: a turn's saves write what it
// adds, not the history; the old layout rewrote the whole conversation on
// each save. Per commit: whether the start has a commit of its own
// depends on how long the model took (Config.StartDelay).
func TestStepWritesDoNotGrowWithTheSession(t *testing.T) {
	f := newFixture(t, nil)
	turn := func() int64 {
		f.fake.Script(anthropictest.Text("pong"))
		before, commits := pageBytes(f.db), f.db.Commits()
		if err := f.agent.TurnWith(context.Background(), chat, "ping", &recorder{}, Hooks{Started: func(*store.Tx) error { return nil }}); err != nil {
			t.Fatal(err)
		}
		return (pageBytes(f.db) - before) / int64(f.db.Commits()-commits)
	}
	storeHistory(t, f.agent, history(20))
	short := turn()
	storeHistory(t, f.agent, history(1500)) // about 4,000 messages, 1 MB
	long := turn()
	page := int64(f.db.Bolt().Info().PageSize)
	t.Logf("page bytes written per commit of a turn: %d after 60 messages, %d after 4,000", short, long)
	if long > short+2*page {
		t.Errorf("a turn's commit wrote %d bytes with a long history, %d with a short one: writes grow with the session", long, short)
	}
}

// TestOldTurnsAreDropped: the store keeps at most keepHigh × the budget of
// a conversation, cut at turn starts, and never what trimmed sends.
func TestOldTurnsAreDropped(t *testing.T) {
	const budget = 300
	f := newFixture(t, func(c *Config) { c.ContextBudget = budget })
	var all []provider.Message
	for i, m := range roundTrip(t, history(150)) {
		s, err := f.agent.load(chat)
		if err != nil {
			t.Fatal(err)
		}
		s.Messages = append(s.Messages, m)
		if err := f.agent.save(chat, s); err != nil {
			t.Fatal(err)
		}
		all = append(all, m)
		var info store.SessionInfo
		var oldest provider.Message
		var size int
		f.db.View(func(tx *store.Tx) error {
			info, _, _ = tx.Session(chat.String())
			return tx.SessionRange(chat.String(), 0, func(seq uint64, raw []byte) bool {
				if seq == info.First {
					json.Unmarshal(raw, &oldest)
				}
				size += len(raw)
				return true
			})
		})
		if info.Next != uint64(i+2) {
			t.Fatalf("after %d messages next = %d", i+1, info.Next)
		}
		if info.First > 1 && !isTurnStart(oldest) {
			t.Fatalf("after %d messages the oldest kept (%d) is not a turn start: %+v", i+1, info.First, oldest)
		}
		var meta sessionMeta
		json.Unmarshal(info.Meta, &meta)
		if meta.Kept != size {
			t.Fatalf("after %d messages meta says %d bytes kept, the store holds %d", i+1, meta.Kept, size)
		}
		if limit := keepHigh * budget * bytesPerToken; size > limit {
			t.Fatalf("after %d messages %d bytes kept, over %d", i+1, size, limit)
		}
		if got, want := s.Messages, trimmed(all, budget); len(got) < len(want) {
			t.Fatalf("after %d messages the session holds %d, trimmed needs %d", i+1, len(got), len(want))
		}
		again, err := f.agent.load(chat)
		if err != nil {
			t.Fatal(err)
		}
		sameMessages(t, fmt.Sprintf("after %d messages", i+1), again.Messages, trimmed(all, budget))
	}
	var info store.SessionInfo
	f.db.View(func(tx *store.Tx) (err error) { info, _, err = tx.Session(chat.String()); return err })
	if info.First == 1 {
		t.Error("nothing was ever dropped")
	}
}

// TestHugeLastTurnIsKept: a turn bigger than everything the store keeps
// is still kept whole — trimmed sends the newest turn whatever its size.
func TestHugeLastTurnIsKept(t *testing.T) {
	const budget = 100
	f := newFixture(t, func(c *Config) { c.ContextBudget = budget })
	storeHistory(t, f.agent, roundTrip(t, history(10)))
	huge := roundTrip(t, []provider.Message{userMsg(strings.Repeat("h", keepHigh*budget*bytesPerToken*2)), assistantMsg("ok")})
	storeHistory(t, f.agent, huge)
	s, err := f.agent.load(chat)
	if err != nil {
		t.Fatal(err)
	}
	sameMessages(t, "after a huge turn", s.Messages, huge)
	f.db.View(func(tx *store.Tx) error {
		info, _, _ := tx.Session(chat.String())
		if info.Kept() != 2 {
			t.Errorf("kept %d messages, want the huge turn's 2", info.Kept())
		}
		return nil
	})
}

// TestStartedHookCommitsWithTheQuestion: with Hooks.Started the user's
// message is stored in the transaction of the hook's write, which commits
// while the model is called — a crash during the call, once it has
// committed, leaves a turn that resumes once, with the question sent once.
func TestStartedHookCommitsWithTheQuestion(t *testing.T) {
	f := newFixture(t, nil)
	f.fake.Script(anthropictest.Text("never seen").StallAfter(0))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	marked := func(tx *store.Tx) error { return tx.Incr("test", "started", 1) }
	done := make(chan error, 1)
	go func() { done <- f.agent.TurnWith(ctx, chat, "build it", &recorder{}, Hooks{Started: marked}) }()
	committed := func() bool {
		var n uint64
		f.db.View(func(tx *store.Tx) (err error) { n, err = tx.Counter("test", "started"); return err })
		return n == 1
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(f.fake.Requests()) == 0 || !committed() {
		if time.Now().After(deadline) {
			t.Fatalf("the model was called %d times; the start committed: %v", len(f.fake.Requests()), committed())
		}
		time.Sleep(5 * time.Millisecond)
	}
	// The file as a crash now, during the call, would leave it.
	crashed := filepath.Join(t.TempDir(), "crashed.db")
	if err := f.db.Bolt().View(func(tx *bolt.Tx) error { return tx.CopyFile(crashed, 0o600) }); err != nil {
		t.Fatal(err)
	}
	cancel()
	<-done

	db, err := store.Open(crashed, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.View(func(tx *store.Tx) error {
		if n, _ := tx.Counter("test", "started"); n != 1 {
			t.Errorf("the hook's write is not in the file: %d", n)
		}
		return nil
	})
	cfg := f.cfg
	cfg.Store = db
	f.fake.Script(anthropictest.Text("Built."))
	ev := &recorder{}
	if err := New(cfg).Resume(context.Background(), chat, ev); err != nil {
		t.Fatalf("resume after the crash: %v", err)
	}
	reqs := f.fake.Requests()
	if body := string(reqs[len(reqs)-1].Body); strings.Count(body, "build it") != 1 || ev.final != "Built." {
		t.Errorf("resumed: final %q, request %s", ev.final, body)
	}
}

func TestStartedHookFailureStartsNothing(t *testing.T) {
	f := newFixture(t, nil)
	storeHistory(t, f.agent, roundTrip(t, history(2)))
	before, _ := f.agent.Status(chat)
	boom := errors.New("boom")
	doneRan := false
	f.fake.Script(anthropictest.Text("never shown"))
	ev := &recorder{}
	err := f.agent.TurnWith(context.Background(), chat, "go", ev, Hooks{
		Started: func(*store.Tx) error { return boom },
		Done:    func(*store.Tx) error { doneRan = true; return nil },
	})
	if !errors.Is(err, ErrNotStarted) || !errors.Is(err, boom) {
		t.Fatalf("err = %v, want ErrNotStarted wrapping the hook's error", err)
	}
	if ev.text.Len() != 0 || ev.final != "" || doneRan {
		t.Errorf("shown %q, final %q, done ran %v", ev.text.String(), ev.final, doneRan)
	}
	if after, _ := f.agent.Status(chat); after.Messages != before.Messages {
		t.Errorf("messages %d → %d: something was stored", before.Messages, after.Messages)
	}
}

func TestDoneHookOnlyAfterAnAnswer(t *testing.T) {
	f := newFixture(t, nil)
	runs := 0
	hooks := Hooks{Done: func(tx *store.Tx) error { runs++; return tx.Incr("test", "done", 1) }}
	f.fake.Script(anthropictest.APIError(500, "api_error", "down"))
	if err := f.agent.TurnWith(context.Background(), chat, "hi", &recorder{}, hooks); err == nil {
		t.Fatal("the provider's error was lost")
	}
	if runs != 0 {
		t.Fatal("done ran after an error")
	}
	f.fake.Script(anthropictest.Text("hello"))
	if err := f.agent.TurnWith(context.Background(), chat, "hi", &recorder{}, hooks); err != nil {
		t.Fatal(err)
	}
	f.db.View(func(tx *store.Tx) error {
		if n, _ := tx.Counter("test", "done"); n != 1 || runs != 1 {
			t.Errorf("done committed %d times, ran %d", n, runs)
		}
		return nil
	})
	failing := Hooks{Done: func(*store.Tx) error { return errors.New("disk full") }}
	f.fake.Script(anthropictest.Text("again"))
	if err := f.agent.TurnWith(context.Background(), chat, "hi", &recorder{}, failing); err == nil {
		t.Error("a failed done hook was not reported")
	}
}

// TestResetForgetsTheMessages: /new deletes the conversation, messages and
// all, and a new one starts numbering afresh.
func TestResetForgetsTheMessages(t *testing.T) {
	f := newFixture(t, nil)
	storeHistory(t, f.agent, roundTrip(t, history(5)))
	if err := f.agent.Reset(chat); err != nil {
		t.Fatal(err)
	}
	f.db.View(func(tx *store.Tx) error {
		if _, found, _ := tx.Session(chat.String()); found {
			t.Error("the conversation is still stored")
		}
		return nil
	})
	f.fake.Script(anthropictest.Text("hi"))
	if err := f.turn(t, "fresh", &recorder{}); err != nil {
		t.Fatal(err)
	}
	if body := string(f.fake.Requests()[0].Body); strings.Contains(body, "question 1") {
		t.Errorf("old history sent after /new: %s", body)
	}
	if st, _ := f.agent.Status(chat); st.Messages != 2 {
		t.Errorf("status = %+v, want 2 messages", st)
	}
}

// TestAnswerWaitsForTheStart: the turn's start commits while the model is
// first called, and nothing of the answer is shown before it has.
func TestAnswerWaitsForTheStart(t *testing.T) {
	f := newFixture(t, nil)
	f.fake.Script(anthropictest.Text("hello there").Chunk(2))
	release := make(chan struct{})
	ev := &recorder{}
	done := make(chan error, 1)
	go func() {
		done <- f.agent.TurnWith(context.Background(), chat, "hi", ev, Hooks{Started: func(*store.Tx) error {
			<-release
			return nil
		}})
	}()
	deadline := time.Now().Add(10 * time.Second)
	for len(f.fake.Requests()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the model was not called while the start committed")
		}
		time.Sleep(2 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // let the answer stream in
	ev.mu.Lock()
	shown := ev.text.String()
	ev.mu.Unlock()
	if shown != "" {
		t.Errorf("%q shown before the turn's start was stored", shown)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if ev.text.String() != "hello there" || ev.final != "hello there" {
		t.Errorf("streamed %q, final %q", ev.text.String(), ev.final)
	}
}

// TestCachedTailFollowsTheStore: a tail kept in memory is used only while
// the stored conversation is the one it came from — another writer's
// append, or a reset and a new conversation just as long, is read anew.
func TestCachedTailFollowsTheStore(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.ContextBudget = 1000 })
	a, b := f.agent, New(f.cfg)
	storeHistory(t, a, roundTrip(t, history(30)))
	check := func(what string) {
		t.Helper()
		got, err := a.load(chat)
		if err != nil {
			t.Fatal(err)
		}
		want, err := New(f.cfg).load(chat)
		if err != nil {
			t.Fatal(err)
		}
		sameMessages(t, what, got.Messages, want.Messages)
		if got.first != want.first || got.next != want.next {
			t.Errorf("%s: first/next %d/%d, want %d/%d", what, got.first, got.next, want.first, want.next)
		}
	}
	if _, hit := a.cached(chat); !hit {
		t.Fatal("a save kept no tail")
	}
	check("after own save")
	storeHistory(t, b, roundTrip(t, []provider.Message{userMsg("from b"), assistantMsg("ok")}))
	check("after another writer appended")
	n := 0
	f.db.View(func(tx *store.Tx) error { info, _, _ := tx.Session(chat.String()); n = int(info.Next - 1); return nil })
	storeHistory(t, a, nil) // a's tail is current again
	if err := b.Reset(chat); err != nil {
		t.Fatal(err)
	}
	var same []provider.Message
	for i := 0; len(same) < n; i++ {
		same = append(same, userMsg(fmt.Sprint("new ", i)), assistantMsg("new answer"))
	}
	storeHistory(t, b, roundTrip(t, same[:n]))
	check("after a reset and a conversation of the same length")
}

// instantModel answers at once, in process. The heap test below uses it
// rather than the HTTP fake, which keeps every request it was sent.
type instantModel struct{}

func (instantModel) Name() string { return "instant" }
func (instantModel) Stream(_ context.Context, _ provider.Request, onText func(string)) (provider.Response, error) {
	const answer = "pong from the instant fake model"
	onText(answer)
	return provider.Response{Content: []provider.Block{{Type: provider.BlockText, Text: answer}}, StopReason: provider.StopEndTurn}, nil
}

// TestTurnsDoNotGrowTheHeap: once a conversation is longer than its
// context budget, turns retain nothing more — neither the session nor
// anything kept per turn grows the heap.
func TestTurnsDoNotGrowTheHeap(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.ContextBudget = 1000; c.Provider = instantModel{} })
	turns := func(n int) {
		for range n {
			err := f.agent.TurnWith(context.Background(), chat, "what time is it?", &recorder{}, Hooks{Started: func(*store.Tx) error { return nil }})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	heap := func() int64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&m)
		return int64(m.HeapAlloc)
	}
	turns(200) // well past the budget: about 50 turns fit
	before := heap()
	turns(800)
	if grew := heap() - before; grew > 64<<10 {
		t.Errorf("the heap grew by %d KiB over 800 turns", grew>>10)
	}
}

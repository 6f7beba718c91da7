package agent

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/latchd/latch/agent/provider"
	"github.com/latchd/latch/store"
)

// SessionKey names one conversation: a chat on a gateway.
type SessionKey struct{ Gateway, Chat string }

func (k SessionKey) String() string { return k.Gateway + "/" + k.Chat }

// session is a conversation as a turn works on it: the meta record and the
// newest part of the history, as much as trimmed can send. The store keeps
// it append-only (one value per message, see store/sessions.go): a save
// writes the messages added since the last save and the small meta record,
// never the whole history, so a step costs the same however long the
// conversation has grown. A restart loses at most the step that was
// running.
type session struct {
	// Messages is the loaded tail of the history; Messages[0] is stored
	// under sequence number first.
	Messages []provider.Message `json:"messages"`
	Started  time.Time          `json:"started"`
	// Tokens counts tokens by UTC day ("2006-01-02").
	Tokens map[string]int `json:"tokens,omitempty"`
	// Running lists the tool calls of the current step that began to run.
	Running []string `json:"running,omitempty"`
	// Waiting holds the current step's approval requests by tool_use id.
	Waiting map[string]waitingApproval `json:"waiting,omitempty"`
	// Results holds the results of the current step's calls that ended,
	// in the order they did, until the step's results are appended. The
	// store keeps them one record each (see saveResults), not in the meta
	// record.
	Results []provider.Block `json:"results,omitempty"`

	gen   string // the stored conversation's generation (sessionMeta.Gen)
	first uint64 // sequence number of Messages[0]
	next  uint64 // the store's next sequence number when last loaded or saved
	saved int    // Messages[:saved] are stored
	kept  int    // stored bytes of the kept messages (sessionMeta.Kept)
	// resultsSaved: Results[:resultsSaved] are stored as result records.
	resultsSaved int
	// staleResults: the stored result records are not where Results
	// starts (the step ended, or an older latch kept them in the meta
	// record); the next save deletes them and stores Results afresh.
	staleResults bool
	// legacy: loaded from the one-value layout of schema 1 (all of it);
	// the first save converts it.
	legacy bool
}

// sessionMeta is the record a save rewrites besides appending messages.
type sessionMeta struct {
	Started time.Time                  `json:"started"`
	Tokens  map[string]int             `json:"tokens,omitempty"`
	Running []string                   `json:"running,omitempty"`
	Waiting map[string]waitingApproval `json:"waiting,omitempty"`
	// Results are the current step's results as latch stored them before
	// each had a record of its own (store.AppendSessionResults); read, and
	// moved to records by the next save, never written.
	Results []provider.Block `json:"results,omitempty"`
	// Kept is the size in bytes of the stored messages, so a save knows
	// when old turns are due to go without reading them.
	Kept int `json:"kept"`
	// Gen is random, new each time the conversation is stored afresh
	// (created, converted, replaced): with the next sequence number it
	// tells whether a tail kept in memory is still the stored one.
	Gen string `json:"gen"`
}

// cachedTail is a conversation's tail as this process last saved it, so
// the next turn need not read and decode it again.
type cachedTail struct {
	gen         string
	first, next uint64
	msgs        []provider.Message // len == cap: an append copies
}

func (a *Agent) cached(key SessionKey) (cachedTail, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	c, ok := a.tails[key]
	return c, ok
}

func (a *Agent) remember(key SessionKey, s *session) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.tails == nil {
		a.tails = make(map[SessionKey]cachedTail)
	}
	a.tails[key] = cachedTail{gen: s.gen, first: s.first, next: s.next, msgs: s.Messages[:len(s.Messages):len(s.Messages)]}
}

// waitingApproval is an approval request that outlives a restart.
type waitingApproval struct {
	ID      string    `json:"id"`
	Expires time.Time `json:"expires"`
	// Decision is the owner's answer, given while no turn waited for the
	// request (see Agent.Decide); "" while there is none.
	Decision Decision `json:"decision,omitempty"`
}

// Notes the agent writes into the history so the model knows what happened.
const (
	noteInterrupted = "interrupted by a restart of latch; it was not run again"
	noteRestart     = "(this turn was cut short by a restart of latch)"
	noteCutOff      = "not run: your answer reached the output token limit while you wrote this call, so its input is incomplete. " +
		"Send it again in smaller pieces (for a long file: write part of it, then add the rest with further calls)."
)

// History bounds. The store keeps at most keepHigh × ContextBudget of a
// conversation (in stored bytes / bytesPerToken, which counts the JSON
// around the text too); a save that goes over drops whole turns from the
// front until at most keepLow × ContextBudget is left. What trimmed sends
// is never dropped, even when the newest turn alone is bigger than that.
// The slack is there for a budget raised later; the gap between the two
// marks makes dropping rare, its cost shared among many steps.
const (
	keepHigh      = 4
	keepLow       = 3
	bytesPerToken = 4
)

// tokensDays is how many days of token counts a session keeps.
const tokensDays = 31

func (a *Agent) load(key SessionKey) (*session, error) {
	s := &session{Started: a.now(), first: 1, next: 1}
	k := key.String()
	err := a.cfg.Store.View(func(tx *store.Tx) error {
		raw, err := tx.LegacySession(k)
		if err != nil || raw != nil {
			if err == nil {
				err = s.loadLegacy(raw)
			}
			return err
		}
		info, found, err := tx.Session(k)
		if err != nil || !found {
			return err
		}
		var m sessionMeta
		if err := json.Unmarshal(info.Meta, &m); err != nil {
			return fmt.Errorf("meta: %w", err)
		}
		s.Started, s.Tokens, s.Running, s.Waiting, s.kept, s.gen = m.Started, m.Tokens, m.Running, m.Waiting, m.Kept, m.Gen
		s.next, s.first = info.Next, info.Next
		if err := s.loadResults(tx, k, m.Results); err != nil {
			return err
		}
		if c, ok := a.cached(key); ok && c.gen == m.Gen && c.next == info.Next && len(c.msgs) > 0 {
			// Unchanged since this process saved it. The kept tail starts
			// where trimmed did then; from there trimmed finds where it
			// starts now, as it would on the whole history.
			s.Messages = trimmed(c.msgs, a.cfg.ContextBudget)
			s.first, s.saved = c.first+uint64(len(c.msgs)-len(s.Messages)), len(s.Messages)
			return nil
		}
		msgs, first, err := readTail(tx, k, a.cfg.ContextBudget)
		if len(msgs) > 0 {
			s.Messages, s.first, s.saved = msgs, first, len(msgs)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("load session %s: %w", key, err)
	}
	return s, nil
}

func (s *session) loadLegacy(raw []byte) error {
	if err := json.Unmarshal(raw, s); err != nil {
		return err
	}
	s.legacy = true
	s.saved = len(s.Messages)
	s.next = uint64(len(s.Messages)) + 1
	return nil
}

// readTail reads the stored messages of key from the newest backwards, as
// far as trimmed(all, budget) would start: to the oldest turn start whose
// messages fit budget, or, when even the newest turn does not fit, to that
// turn's start. Older messages are not read. Because a turn only appends,
// what trimmed sends later in the turn starts no earlier.
func readTail(tx *store.Tx, key string, budget int) (msgs []provider.Message, first uint64, err error) {
	var rev []provider.Message
	total, cut, stopped := 0, 0, false
	var oldest uint64
	var derr error
	err = tx.SessionTail(key, func(seq uint64, raw []byte) bool {
		var m provider.Message
		if derr = json.Unmarshal(raw, &m); derr != nil {
			derr = fmt.Errorf("message %d: %w", seq, derr)
			return false
		}
		rev = append(rev, m)
		oldest = seq
		total += approxTokens(m)
		if isTurnStart(m) && (total <= budget || cut == 0) {
			cut, first = len(rev), seq
		}
		stopped = total > budget && cut > 0
		return !stopped
	})
	if err == nil {
		err = derr
	}
	if err != nil {
		return nil, 0, err
	}
	// The oldest stored message is where trimmed starts at the latest.
	if !stopped && (total <= budget || cut == 0) {
		cut, first = len(rev), oldest
	}
	msgs = make([]provider.Message, cut)
	for i := range msgs {
		msgs[i] = rev[cut-1-i]
	}
	return msgs, first, nil
}

// save stores what s added since it was loaded or last saved.
func (a *Agent) save(key SessionKey, s *session) error { return a.saveWith(key, s, nil) }

// saveWith stores the messages s added and its meta record, and runs also
// (when not nil), all in one transaction: either all of it is stored or
// none.
func (a *Agent) saveWith(key SessionKey, s *session, also func(*store.Tx) error) error {
	k := key.String()
	fresh, added, err := encodeMessages(s.Messages[s.saved:])
	if err != nil {
		return fmt.Errorf("save session %s: %w", key, err)
	}
	var (
		next, first = s.next + uint64(len(fresh)), s.first
		kept        = s.kept + added
		drop        uint64 // messages below this sequence number were dropped
		gen         = s.gen
	)
	if gen == "" {
		gen = newGen()
	}
	err = a.cfg.Store.Update(func(tx *store.Tx) error {
		info, found, err := tx.Session(k)
		if err != nil {
			return err
		}
		if found {
			s.keepDecisions(info.Meta)
		}
		if s.legacy || found && info.Next != s.next || !found && s.next != 1 {
			gen = newGen()
			// Not the conversation s was loaded from as it is stored:
			// schema 1's layout, or it was reset meanwhile. Store what s
			// holds afresh, as the old layout's save did.
			old, oldSize, err := encodeMessages(s.Messages[:s.saved])
			if err != nil {
				return err
			}
			all := append(old, fresh...)
			next, first, kept = uint64(len(all))+1, 1, oldSize+added
			if _, err := tx.ReplaceSession(k, s.metaRecord(kept, gen), all...); err != nil {
				return err
			}
			// That deleted the result records too.
			if err := s.saveResults(tx, k, true); err != nil {
				return err
			}
		} else if _, err := tx.AppendSession(k, s.metaRecord(kept, gen), fresh...); err != nil {
			return err
		} else if err := s.saveResults(tx, k, !found); err != nil {
			return err
		}
		if kept > keepHigh*a.cfg.ContextBudget*bytesPerToken {
			// The turn that trimmed starts at stays, whatever its size.
			limit := first + uint64(len(s.Messages)-len(trimmed(s.Messages, a.cfg.ContextBudget)))
			var freed int
			if drop, freed, err = dropOldTurns(tx, k, kept-keepLow*a.cfg.ContextBudget*bytesPerToken, limit); err != nil {
				return err
			}
			if freed > 0 {
				kept -= freed
				if _, err := tx.AppendSession(k, s.metaRecord(kept, gen)); err != nil {
					return err
				}
			}
		}
		if also != nil {
			return also(tx)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("save session %s: %w", key, err)
	}
	s.legacy, s.saved, s.next, s.first, s.kept, s.gen = false, len(s.Messages), next, first, kept, gen
	s.resultsSaved, s.staleResults = len(s.Results), false
	if drop > s.first {
		s.Messages = s.Messages[drop-s.first:]
		s.saved -= int(drop - s.first)
		s.first = drop
	}
	a.remember(key, s)
	return nil
}

func (s *session) metaRecord(kept int, gen string) []byte {
	raw, _ := json.Marshal(sessionMeta{Started: s.Started, Tokens: s.Tokens, Running: s.Running, Waiting: s.Waiting, Kept: kept, Gen: gen})
	return raw
}

// keepDecisions copies into s.Waiting the decisions that the stored meta
// record holds for its requests and s does not: Decide stores one for a
// request no turn waits for, and the save of a turn that loaded the
// session before must not drop it.
func (s *session) keepDecisions(meta []byte) {
	if len(s.Waiting) == 0 {
		return
	}
	var m struct {
		Waiting map[string]waitingApproval `json:"waiting"`
	}
	if json.Unmarshal(meta, &m) != nil {
		return
	}
	for use, w := range s.Waiting {
		if st := m.Waiting[use]; w.Decision == "" && st.ID == w.ID && st.Decision != "" {
			s.Waiting[use] = st
		}
	}
}

func newGen() string { return hex.EncodeToString(binary.BigEndian.AppendUint64(nil, rand.Uint64())) }

func encodeMessages(msgs []provider.Message) (raw [][]byte, size int, err error) {
	raw = make([][]byte, len(msgs))
	for i, m := range msgs {
		if raw[i], err = json.Marshal(m); err != nil {
			return nil, 0, err
		}
		size += len(raw[i])
	}
	return raw, size, nil
}

// dropOldTurns deletes the oldest stored messages of key, whole turns at a
// time, until at least atLeast bytes are gone, but never the message
// numbered limit or any after it. It returns the first sequence number
// kept (0 when nothing was dropped) and the bytes freed.
func dropOldTurns(tx *store.Tx, key string, atLeast int, limit uint64) (cut uint64, freed int, err error) {
	size, oldest := 0, uint64(0)
	var derr error
	err = tx.SessionRange(key, 0, func(seq uint64, raw []byte) bool {
		if oldest == 0 {
			oldest = seq
		}
		if seq >= limit {
			cut, freed = seq, size
			return false
		}
		if seq > oldest {
			var m struct {
				Role    provider.Role
				Content []struct{ Type string }
			}
			if derr = json.Unmarshal(raw, &m); derr != nil {
				derr = fmt.Errorf("message %d: %w", seq, derr)
				return false
			}
			if m.Role == provider.RoleUser && !slices.ContainsFunc(m.Content, func(b struct{ Type string }) bool {
				return b.Type == provider.BlockToolResult
			}) {
				cut, freed = seq, size
				if freed >= atLeast {
					return false
				}
			}
		}
		size += len(raw)
		return true
	})
	if err == nil {
		err = derr
	}
	if err != nil || cut <= oldest {
		return 0, 0, err
	}
	return cut, freed, tx.DropSessionBefore(key, cut)
}

// repair makes a history that a crash cut valid again: a tool call gets
// the result saved when it ended, or else "interrupted" — it is never
// re-run; the model reads that and decides what to do next.
func (s *session) repair() {
	n := len(s.Messages)
	if n == 0 || s.Messages[n-1].Role != provider.RoleAssistant {
		return
	}
	var results []provider.Block
	for _, b := range s.Messages[n-1].Content {
		if b.Type != provider.BlockToolUse {
			continue
		}
		r, ok := s.result(b.ID)
		if !ok {
			r = provider.Block{Type: provider.BlockToolResult, ID: b.ID, Text: noteInterrupted, IsError: true}
		}
		results = append(results, r)
	}
	if results != nil {
		s.Messages = append(s.Messages, provider.Message{Role: provider.RoleUser, Content: results})
	}
}

// danglingToolUses returns the tool calls of a last assistant message that
// have no results yet.
func (s *session) danglingToolUses() []provider.Block {
	n := len(s.Messages)
	if n == 0 || s.Messages[n-1].Role != provider.RoleAssistant {
		return nil
	}
	var uses []provider.Block
	for _, b := range s.Messages[n-1].Content {
		if b.Type == provider.BlockToolUse {
			uses = append(uses, b)
		}
	}
	return uses
}

// unfinished reports whether the history ends on the user's side: a turn
// that a crash or stop cut before the model answered.
func (s *session) unfinished() bool {
	n := len(s.Messages)
	return n > 0 && s.Messages[n-1].Role == provider.RoleUser
}

// closeTurn keeps the strict user/assistant alternation providers expect: a
// turn that ends on the user's side (an error, /stop, max_steps, a crash)
// gets a short assistant note.
func (s *session) closeTurn(note string) {
	if n := len(s.Messages); n > 0 && s.Messages[n-1].Role == provider.RoleUser {
		s.Messages = append(s.Messages, provider.Message{Role: provider.RoleAssistant,
			Content: []provider.Block{{Type: provider.BlockText, Text: note}}})
	}
}

// trimmed returns the newest part of the history that fits budget
// (approximate tokens). It drops whole turns from the front — a turn starts
// at a user message that carries no tool results — so a tool call is never
// separated from its result. The newest turn is always kept.
func trimmed(msgs []provider.Message, budget int) []provider.Message {
	total := 0
	sizes := make([]int, len(msgs))
	for i, m := range msgs {
		sizes[i] = approxTokens(m)
		total += sizes[i]
	}
	start := 0
	for total > budget {
		next := nextTurn(msgs, start+1)
		if next < 0 {
			break
		}
		for i := start; i < next; i++ {
			total -= sizes[i]
		}
		start = next
	}
	return msgs[start:]
}

func nextTurn(msgs []provider.Message, from int) int {
	for i := from; i < len(msgs); i++ {
		if isTurnStart(msgs[i]) {
			return i
		}
	}
	return -1
}

func isTurnStart(m provider.Message) bool {
	if m.Role != provider.RoleUser {
		return false
	}
	for _, b := range m.Content {
		if b.Type == provider.BlockToolResult {
			return false
		}
	}
	return true
}

// approxTokens estimates a message's size: about four bytes a token.
func approxTokens(m provider.Message) int {
	n := 4
	for _, b := range m.Content {
		n += (len(b.Text) + len(b.Input) + len(b.Name) + len(b.ID)) / 4
	}
	return n
}

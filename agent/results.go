package agent

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/latchd/latch/agent/provider"
	"github.com/latchd/latch/store"
)

// A step's results are saved one by one as its calls end, each before the
// next call starts, so that a restart reuses them instead of running a
// call's side effect again. Each is stored once, as a record of its own
// (store.AppendSessionResults): kept in the meta record, which every save
// rewrites, a step of n results of size S wrote n²/2·S bytes. The records
// go in the save that ends the step (endStep), or with the conversation.

// loadResults reads the current step's results: those an older latch kept
// in the meta record (old), then the records.
func (s *session) loadResults(tx *store.Tx, key string, old []provider.Block) error {
	s.Results = old
	var derr error
	err := tx.SessionResults(key, func(raw []byte) bool {
		var r provider.Block
		if derr = json.Unmarshal(raw, &r); derr != nil {
			derr = fmt.Errorf("result %d: %w", len(s.Results), derr)
			return false
		}
		s.Results = append(s.Results, r)
		return true
	})
	if err == nil {
		err = derr
	}
	// Results in the meta record are rewritten as records, all of them, by
	// the save that rewrites the meta record without them.
	s.staleResults = len(old) > 0
	if !s.staleResults {
		s.resultsSaved = len(s.Results)
	}
	return err
}

// saveResults stores the step's results the store does not hold yet, one
// record each, so that a save writes the result that just ended and not
// every one before it. All of them when none are stored (gone is true:
// the conversation was stored afresh) or the stored ones are stale — also
// when Results shrank without endStep, rather than slice out of range.
func (s *session) saveResults(tx *store.Tx, key string, gone bool) error {
	from := s.resultsSaved
	switch {
	case gone:
		from = 0 // nothing stored to clear
	case s.staleResults || from > len(s.Results):
		if err := tx.ClearSessionResults(key); err != nil {
			return err
		}
		from = 0
	}
	raw := make([][]byte, 0, len(s.Results)-from)
	for _, r := range s.Results[from:] {
		b, err := json.Marshal(r)
		if err != nil {
			return fmt.Errorf("result %s: %w", r.ID, err)
		}
		raw = append(raw, b)
	}
	return tx.AppendSessionResults(key, raw...)
}

// endStep forgets the step's records: what ran, waits, and ended. The next
// save deletes the stored results with them, in the transaction that
// stores the step's end.
func (s *session) endStep() {
	s.Running, s.Waiting, s.Results = nil, nil, nil
	s.staleResults = true
}

// result returns the saved result of the current step's call id.
func (s *session) result(id string) (provider.Block, bool) {
	i := slices.IndexFunc(s.Results, func(r provider.Block) bool { return r.ID == id })
	if i < 0 {
		return provider.Block{}, false
	}
	return s.Results[i], true
}

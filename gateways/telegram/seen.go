package telegram

import (
	"slices"
	"strconv"
	"strings"
)

// maxSeen is how many update ids latch remembers as ingested. Telegram
// repeats a webhook delivery only until it gets a 2xx, and with
// max_connections 1 it has one update in flight at a time, so a repeat is
// of one of the last few updates; polling takes at most maxBatch at a time.
// 256 leaves a wide margin and keeps the cursor short (consecutive ids are
// stored as a range).
const maxSeen = 256

// maxUpdateID bounds the update ids latch accepts. Telegram's are 32-bit;
// the bound keeps id+1 and the ranges of a cursor far from overflowing.
const maxUpdateID = 1 << 53

// seen is the cursor of both webhook and polling: the update ids ingested
// most recently, oldest first. An update whose id is in it was stored
// already and is acknowledged (or confirmed) without being stored again. It
// is written by the same Ingest that stores the update, so the two cannot
// disagree.
//
// Why not "drop every id below the highest one seen", like a getUpdates
// offset? Telegram picks the next update_id at random when a bot had no
// update for a week, and says ids may arrive out of order by webhook; a
// high-water mark would then drop — and acknowledge, so lose — new updates.
// A window of recent ids drops repeats and nothing else.
//
// Polling has the same problem (see translate): its offset is the next id
// expected, but after a restart of the ids everything new is below it.
//
// Encoded, it reads "<next>;<ids>": next is the last id + 1, the offset of
// the next getUpdates (polling adds each batch in ascending order, so the
// last id is the batch's highest), and ids are comma-separated ids and
// ranges "a-b" of consecutive ids, in order of arrival. The stored cursor
// may carry the forum topics after it (see topicstate.go).
type seen struct {
	ids []int
}

// parseSeen reads a stored cursor. A bare "<next>" (what polling stored
// before it kept a list) means every id below next was stored; of those,
// only the last getUpdates batch can still be pending at Telegram (it is
// confirmed by the next poll), so the ids of one batch below next count as
// seen. ok is false for a cursor that is neither.
func parseSeen(c string) (s seen, ok bool) {
	if c == "" {
		return seen{}, true
	}
	head, list, hasList := strings.Cut(c, ";")
	next, err := strconv.Atoi(head)
	if err != nil || next <= 0 || next > maxUpdateID+1 {
		return seen{}, false
	}
	if !hasList {
		for id := max(1, next-maxBatch); id < next; id++ {
			s.ids = append(s.ids, id)
		}
		return s, true
	}
	for part := range strings.SplitSeq(list, ",") {
		lo, hi, ok := parseRun(part)
		if !ok {
			return seen{}, false
		}
		// Only the last maxSeen ids are kept, so a long run costs no more.
		for id := max(lo, hi-maxSeen+1); id <= hi; id++ {
			s.ids = append(s.ids, id)
		}
		s.trim()
	}
	return s, true
}

// parseRun reads "a" or "a-b" (0 < a <= b).
func parseRun(part string) (lo, hi int, ok bool) {
	a, b, isRange := strings.Cut(part, "-")
	lo, err := strconv.Atoi(a)
	if err != nil || lo <= 0 || lo > maxUpdateID {
		return 0, 0, false
	}
	if !isRange {
		return lo, lo, true
	}
	hi, err = strconv.Atoi(b)
	if err != nil || hi < lo || hi > maxUpdateID {
		return 0, 0, false
	}
	return lo, hi, true
}

// has reports whether id was ingested.
func (s seen) has(id int) bool {
	for _, v := range s.ids {
		if v == id {
			return true
		}
	}
	return false
}

// with returns s with id added as the most recent, without changing s.
func (s seen) with(id int) seen {
	ids := make([]int, 0, min(len(s.ids)+1, maxSeen))
	if len(s.ids)+1 > maxSeen {
		ids = append(ids, s.ids[len(s.ids)+1-maxSeen:]...)
	} else {
		ids = append(ids, s.ids...)
	}
	return seen{ids: append(ids, id)}
}

// withAll returns s with a getUpdates batch's ids added in ascending order,
// so that the last one, which gives the cursor its next, is the highest.
func (s seen) withAll(ids []int) seen {
	sorted := slices.Sorted(slices.Values(ids))
	out := seen{ids: make([]int, 0, len(s.ids)+len(sorted))}
	out.ids = append(append(out.ids, s.ids...), sorted...)
	out.trim()
	return out
}

func (s *seen) trim() {
	if n := len(s.ids); n > maxSeen {
		s.ids = s.ids[n-maxSeen:]
	}
}

// encode is the cursor to store; see seen.
func (s seen) encode() string {
	if len(s.ids) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString(strconv.Itoa(s.ids[len(s.ids)-1] + 1))
	b.WriteByte(';')
	for i := 0; i < len(s.ids); {
		j := i
		for j+1 < len(s.ids) && s.ids[j+1] == s.ids[j]+1 {
			j++
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(s.ids[i]))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(s.ids[j]))
		}
		i = j + 1
	}
	return b.String()
}

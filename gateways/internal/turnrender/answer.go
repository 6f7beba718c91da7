package turnrender

import (
	"context"
	"time"
)

// Poster is what a Streamed answer needs of its adapter: M is a message's
// platform id, R one message as the platform shows it (its rendered
// text). Render cuts the answer's Markdown so far into messages; Post
// and Edit make one call each (Post is tried again by Persist); EditDue
// is how long until the chat may be edited again and Edited notes an
// edit made; Notice says that part of the answer was lost.
type Poster[M any, R comparable] interface {
	Render(text string) []R
	Post(ctx context.Context, r R) (M, error)
	Edit(ctx context.Context, id M, r R) error
	EditDue() time.Duration
	Edited()
	Persist(ctx context.Context, fn func() error) error
	Notice(ctx context.Context) error
	Failed(ctx context.Context, what string, err error)
}

// Streamed is an Answer shown as the messages Render cuts it into,
// streamed by edits: the first message waits First (the answer may be
// complete by then, and is sent once), later changes wait EditDue. A
// message that cannot be sent, or a final edit that cannot be made,
// loses the rest of the answer, which then says so once (Notice).
type Streamed[M any, R comparable] struct {
	P     Poster[M, R]
	First time.Duration

	started time.Time
	msgs    []streamedMsg[M, R]
	done    bool
	// lost: a message or final edit could not be delivered; noticed:
	// Notice was sent (or tried).
	lost, noticed bool
}

type streamedMsg[M any, R comparable] struct {
	id M
	r  R
}

// Done reports whether the frozen answer is shown in full (or given up).
func (a *Streamed[M, R]) Done() bool { return a.done }

// Shown: what is sent is in the chat.
func (a *Streamed[M, R]) Shown(string) bool { return true }

// Next implements Answer.
func (a *Streamed[M, R]) Next(text string, frozen bool) (Step, time.Duration) {
	if a.done {
		return nil, 0
	}
	if a.lost {
		return a.finish(frozen)
	}
	want := a.P.Render(text)
	if len(want) == 0 {
		if frozen {
			a.done = true
		}
		return nil, 0
	}
	if !frozen && len(a.msgs) == 0 {
		if a.started.IsZero() {
			a.started = time.Now()
		}
		if wait := time.Until(a.started.Add(a.First)); wait > 0 {
			return nil, wait
		}
	}
	for i, w := range want {
		if i == len(a.msgs) {
			return a.sendStep(w), 0
		}
		if a.msgs[i].r == w {
			continue
		}
		if wait := a.P.EditDue(); wait > 0 {
			return nil, wait
		}
		return a.editStep(i, w, frozen), 0
	}
	return a.finish(frozen)
}

func (a *Streamed[M, R]) finish(frozen bool) (Step, time.Duration) {
	if !frozen {
		return nil, 0
	}
	if a.lost && !a.noticed {
		return func(ctx context.Context) func() {
			if err := a.P.Notice(ctx); err != nil {
				a.P.Failed(ctx, "saying that part of the answer was lost failed", err)
			}
			return func() { a.noticed = true }
		}, 0
	}
	a.done = true
	return nil, 0
}

func (a *Streamed[M, R]) sendStep(r R) Step {
	return func(ctx context.Context) func() {
		var id M
		err := a.P.Persist(ctx, func() (err error) {
			id, err = a.P.Post(ctx, r)
			return err
		})
		return func() {
			if err != nil {
				a.P.Failed(ctx, "sending the answer failed", err)
				a.lost = true
				return
			}
			a.msgs = append(a.msgs, streamedMsg[M, R]{id, r})
		}
	}
}

// editStep changes an answer's message. While it streams a failed edit
// is left to the next one; the final edit is tried again (Persist), and
// one that still fails makes the answer say so.
func (a *Streamed[M, R]) editStep(i int, r R, frozen bool) Step {
	id := a.msgs[i].id
	return func(ctx context.Context) func() {
		a.P.Edited()
		edit := func() error { return a.P.Edit(ctx, id, r) }
		var err error
		if frozen {
			err = a.P.Persist(ctx, edit)
		} else {
			err = edit()
		}
		return func() {
			if err != nil {
				a.P.Failed(ctx, "editing the answer failed", err)
				a.lost = a.lost || frozen
			}
			a.msgs[i].r = r
		}
	}
}

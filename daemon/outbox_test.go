package daemon

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latchd/latch/config"
	"github.com/latchd/latch/gateways"
	"github.com/latchd/latch/store"
	"go.etcd.io/bbolt"
)

// Where a crash round kills latch, once the command's answer is stored.
const (
	killStored    = iota // stored, its sendMessage held before the platform sees it
	killRequested        // the request reached the platform's door, not the platform
	killTaken            // the platform took the message; its answer is lost
	killAnswered         // the platform's answer reached latch: races the delivered mark
	killPoints
)

// dyingLink stands between one daemon and the fake Bot API, and dies with
// the daemon: a kill -9 ends the process's connections too, so nothing it
// would still send after the kill reaches the platform.
type dyingLink struct {
	srv *httptest.Server
	// daemon is the one the link serves; dead is set when it is killed.
	daemon atomic.Pointer[running]
	dead   atomic.Bool
	once   sync.Once
	// point is the round's kill point (-1: none), spins its jitter.
	point, spins atomic.Int64
	held         chan struct{}
	releaseOnce  sync.Once
	// arrived is closed when a held sendMessage is there.
	arrived     chan struct{}
	arrivedOnce sync.Once
}

func newDyingLink(t *testing.T, upstream string) *dyingLink {
	t.Helper()
	u, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	l := &dyingLink{held: make(chan struct{}), arrived: make(chan struct{})}
	l.point.Store(-1)
	proxy := httputil.NewSingleHostReverseProxy(u)
	proxy.ModifyResponse = func(r *http.Response) error {
		if l.sending(r.Request) && l.point.Load() == killTaken {
			l.die()
		}
		if l.dead.Load() {
			return http.ErrAbortHandler
		}
		return nil
	}
	proxy.ErrorHandler = func(http.ResponseWriter, *http.Request, error) { panic(http.ErrAbortHandler) }
	l.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if l.sending(r) {
			switch l.point.Load() {
			case killStored:
				l.arrivedOnce.Do(func() { close(l.arrived) })
				<-l.held // the test kills, then lets go
			case killRequested:
				l.die()
			}
		}
		if l.dead.Load() {
			panic(http.ErrAbortHandler)
		}
		proxy.ServeHTTP(w, r)
		if l.sending(r) && l.point.Load() == killAnswered {
			w.(http.Flusher).Flush() // the answer is latch's now
			l.die()
		}
	}))
	t.Cleanup(l.srv.Close)
	t.Cleanup(l.release) // first: a failed round must not leave a request held
	return l
}

// release lets a held sendMessage go on, once.
func (l *dyingLink) release() { l.releaseOnce.Do(func() { close(l.held) }) }

// sending: r posts a message into a chat.
func (l *dyingLink) sending(r *http.Request) bool {
	return strings.HasSuffix(r.URL.Path, "/sendMessage")
}

// die kills the daemon a random number of scheduler turns from now: it
// cuts the link and closes the store under the daemon, once.
func (l *dyingLink) die() {
	for range l.spins.Load() {
		runtime.Gosched()
	}
	l.once.Do(func() {
		l.dead.Store(true)
		l.daemon.Load().d.db.Close()
	})
}

// TestCrashAfterCommandFinished kills latch — its store closed with no
// shutdown and its connections cut, the in-process kill -9 — over 120
// rounds, each after a quick command finished and its answer was stored,
// at a random point of its delivery: before the message leaves latch, at
// the platform's door, once the platform took it, and once its answer is
// back while the delivered mark commits. (A kill between the command's
// exit and the commit of its answer, a window of the commit's length, is
// the one MsgMayHaveRun reports; no round lands there.) It counts the
// commands that ran (a marker file each), the answers delivered and the
// reports of interruption: every command ran once, its answer arrived,
// no finished command was reported interrupted, and a second copy of an
// answer always says it is sent again.
func TestCrashAfterCommandFinished(t *testing.T) {
	const rounds = 120
	seed := rand.Uint64()
	rng := rand.New(rand.NewPCG(seed, 1))
	t.Logf("seed %d", seed)
	e := newEnv(t)
	var link atomic.Pointer[dyingLink]
	e.tweak = func(c *config.Config) { c.Telegram.APIURL = link.Load().srv.URL }
	marks := t.TempDir()
	var r *running
	start := func() {
		l := newDyingLink(t, e.tg.URL())
		link.Store(l)
		r = e.start()
		l.daemon.Store(r)
	}
	start()
	e.pair()
	points := make([]int, killPoints)
	for n := range rounds {
		settle(t, r.d.db)
		point := rng.IntN(killPoints)
		points[point]++
		l := link.Load()
		l.spins.Store(int64(rng.IntN(500)))
		l.point.Store(int64(point))
		e.say(owner, fmt.Sprintf("!echo ans-%03d; echo x >> %s", n, filepath.Join(marks, fmt.Sprint(n))))
		if point == killStored {
			select {
			case <-l.arrived: // sent only once stored
			case <-time.After(20 * time.Second):
				t.Fatal("the answer was never sent")
			}
			l.die()
			l.release()
		}
		waitEvery(t, time.Millisecond, l.dead.Load)
		r.stop(t)
		start()
	}
	settle(t, r.d.db)

	sent := e.tg.SentTo(owner.ID)
	var lost, twice, again, interrupted int
	for n := range rounds {
		if b, _ := os.ReadFile(filepath.Join(marks, fmt.Sprint(n))); string(b) != "x\n" {
			t.Errorf("command %d: marker %q, want it run once", n, b)
		}
		copies, plain := 0, 0
		for _, m := range sent {
			if !strings.Contains(m.Current(), fmt.Sprintf("ans-%03d\n", n)) {
				continue
			}
			copies++
			if strings.HasPrefix(m.Current(), gateways.MsgSentAgain) {
				again++
			} else {
				plain++
			}
		}
		if copies == 0 {
			lost++
		}
		if plain > 1 {
			twice++
		}
	}
	for _, m := range sent {
		if strings.Contains(m.Current(), "interrupted by a restart") {
			interrupted++
		}
	}
	t.Logf("%d rounds, kill points %v: %d answers sent again, %d lost, %d twice unmarked, %d interruption reports",
		rounds, points, again, lost, twice, interrupted)
	if lost > 0 || twice > 0 || interrupted > 0 {
		t.Errorf("%d answers lost, %d delivered twice without %q, %d finished commands reported interrupted:%s",
			lost, twice, gateways.MsgSentAgain, interrupted, e.describeSent())
	}
}

// settle waits until the daemon owes nothing: the inbox and the outbox
// are empty.
func settle(t *testing.T, db *store.DB) {
	t.Helper()
	waitEvery(t, time.Millisecond, func() bool {
		var n int
		db.View(func(tx *store.Tx) (err error) { n, err = tx.InboxLen(); return err })
		return n == 0 && outboxLen(db) == 0
	})
}

// outboxLen is the number of answers owed, read from the daemon's own
// handle (bbolt's lock keeps a second one out).
func outboxLen(db *store.DB) (n int) {
	db.Bolt().View(func(tx *bbolt.Tx) error {
		if b := tx.Bucket([]byte("outbox")); b != nil {
			n = b.Stats().KeyN
		}
		return nil
	})
	return n
}

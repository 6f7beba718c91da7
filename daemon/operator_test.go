package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/latchd/latch/config"
	"github.com/latchd/latch/control"
	"github.com/latchd/latch/gateways/telegram/telegramtest"
	"github.com/latchd/latch/pairing"
	"github.com/latchd/latch/store"
)

// operatorClientEnv makes the test binary act as `latch pair telegram`
// (value "mint") or `latch unpair telegram` (value "unpair"): a control
// client that makes the request and prints what happened.
const operatorClientEnv = "LATCH_TEST_OPERATOR_CLIENT"

func runOperatorClient(op string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	home := os.Getenv(config.EnvHome)
	c := control.NewClient(config.SocketPath(home))
	mint := func(replace bool) (string, error) {
		req := control.MintRequest{Gateway: "telegram", Replace: replace}
		res, err := c.Mint(ctx, req)
		if errors.Is(err, control.ErrNoDaemon) {
			// What `latch pair` does with no daemon running.
			err = offline(home, func(db *store.DB, p *pairing.Pairer) (err error) {
				res, err = MintOffline(db, p, req, nil)
				return err
			})
		}
		return "MINTED " + res.Code, err
	}
	unpair := func() (string, error) {
		err := c.Unpair(ctx, "telegram")
		if errors.Is(err, control.ErrNoDaemon) {
			err = offline(home, func(db *store.DB, p *pairing.Pairer) error {
				_, err := UnpairOffline(db, p, "telegram")
				return err
			})
		}
		return "UNPAIRED", err
	}
	var steps []func() (string, error)
	switch op {
	case "mint", "mint-replace":
		steps = append(steps, func() (string, error) { return mint(op == "mint-replace") })
	case "unpair":
		steps = append(steps, unpair)
	case "unpair-mint":
		steps = append(steps, unpair, func() (string, error) { return mint(false) })
	case "jobs-add":
		steps = append(steps, func() (string, error) {
			_, err := c.JobsAdd(ctx, control.JobAddRequest{Gateway: "telegram", Schedule: "1h", Text: "!id"})
			return "ADDED", err
		})
	case "jobs-rm":
		steps = append(steps, func() (string, error) {
			_, err := c.JobsRemove(ctx, 1)
			return "REMOVED", err
		})
	default:
		steps = append(steps, func() (string, error) { return "", fmt.Errorf("unknown operation %q", op) })
	}
	for _, step := range steps {
		done, err := step()
		switch {
		case errors.Is(err, control.ErrRefused):
			fmt.Println("REFUSED:", err)
		case err != nil:
			fmt.Println("ERROR:", err)
		default:
			fmt.Println(done)
		}
	}
	return 0
}

// offline opens home's store and pairing key as the CLI does with no
// daemon running.
func offline(home string, fn func(*store.DB, *pairing.Pairer) error) error {
	secret, err := config.LoadSecret(home)
	if err != nil {
		return err
	}
	p, err := pairing.New(secret)
	if err != nil {
		return err
	}
	db, err := OpenStore(home)
	if err != nil {
		return err
	}
	defer db.Close()
	return fn(db, p)
}

// fromInsideARun has the latched owner's chat run the operator client for
// op: as a `!` command, or (forked) from a setsid double fork that outlives
// that command.
func fromInsideARun(e *env, op string, forked bool) string {
	e.t.Helper()
	if !forked {
		return fromChat(e, "direct-"+op, op, nil)
	}
	return fromChat(e, "forked-"+op, op, func(client, out string) string {
		return fmt.Sprintf("(setsid sh -c '%s > %s.tmp 2>&1; mv %s.tmp %s' &)", client, out, out, out)
	})
}

// fromChat has the owner's chat run the operator client for op, directly
// or through start, which gets the client's command line and the file its
// output must end up in. It returns the command's whole reply. The shell
// prints a label first and the reply is awaited with its exit line,
// because the fake matches among everything the chat has been sent so
// far: waiting for any finished command would find an earlier one.
func fromChat(e *env, label, op string, start func(client, out string) string) string {
	e.t.Helper()
	client := fmt.Sprintf("%s=%s %s=%s %s", operatorClientEnv, op, config.EnvHome, e.home, os.Args[0])
	cmd := client
	if start != nil {
		out := filepath.Join(e.home, label+".out")
		cmd = start(client, out) + fmt.Sprintf("; for i in $(seq 200); do [ -e %s ] && break; sleep 0.1; done; cat %s", out, out)
	}
	e.say(owner, fmt.Sprintf("!echo %s; %s", label, cmd))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := e.tg.WaitSent(ctx, func(m telegramtest.Sent) bool {
		return m.ChatID == owner.ID && strings.Contains(m.Current(), label) && strings.Contains(m.Current(), "exit ")
	})
	if err != nil {
		e.t.Fatalf("no finished reply labelled %q: %v\nsent: %s\nlogs:\n%s", label, err, e.describeSent(), e.logs.String())
	}
	return m.Current()
}

// TestE2ENoMintFromInsideARun: a command from the chat (or an agent tool)
// runs as the owner's uid, so the uid check alone would let it mint a code
// and read it back. The daemon is a subreaper and refuses descendants —
// directly, and after a setsid double fork.
func TestE2ENoMintFromInsideARun(t *testing.T) {
	e := newEnv(t)
	e.start()
	e.pair()
	for _, forked := range []bool{false, true} {
		if m := fromInsideARun(e, "mint", forked); !strings.Contains(m, "REFUSED") || strings.Contains(m, "MINTED") {
			t.Fatalf("a command from the chat (forked: %v) got %q, want REFUSED", forked, m)
		}
	}
	// The owner's own shell (here: the test process) still can, and the
	// latched chat hears about it.
	e.mintReq(control.MintRequest{Gateway: "telegram", Replace: true})
	e.waitReply(owner.ID, "pairing code for the telegram bot")
	if st := e.status(); st.Latch == nil {
		t.Fatal("latch lost")
	}
}

// TestE2ENoUnpairFromInsideARun: unpairing is refused to the daemon's
// descendants like minting. A command from the chat that could unpair
// would let a prompt-injected model cut the owner off, and, while a code
// is pending, leave the gateway to whoever holds that code. Shown to fail
// with the operator check removed from Daemon.Unpair.
func TestE2ENoUnpairFromInsideARun(t *testing.T) {
	e := newEnv(t)
	e.start()
	e.pair()
	// A pending code, so the test also sees a refused unpair leave it be.
	e.mintReq(control.MintRequest{Gateway: "telegram", Replace: true})
	e.waitReply(owner.ID, "pairing code for the telegram bot")
	for _, forked := range []bool{false, true} {
		if m := fromInsideARun(e, "unpair", forked); !strings.Contains(m, "REFUSED") || strings.Contains(m, "UNPAIRED") {
			t.Fatalf("a command from the chat (forked: %v) got %q, want REFUSED", forked, m)
		}
	}
	st := e.status()
	if st.Latch == nil || st.Latch.ChatID != strconv.FormatInt(owner.ID, 10) {
		t.Fatalf("latch after the chat's unpair attempts = %+v, want the owner's", st.Latch)
	}
	if st.Pending == nil {
		t.Error("the chat's refused unpair removed the pending code")
	}
	if n := e.repliesTo(owner.ID, "This chat was unpaired"); n != 0 {
		t.Errorf("the owner was told of %d unpairings that were refused", n)
	}
	// The owner's own shell (here: the test process) still can.
	if err := e.client().Unpair(t.Context(), "telegram"); err != nil {
		t.Fatalf("the owner's unpair: %v", err)
	}
	e.waitReply(owner.ID, "This chat was unpaired")
	if st := e.status(); st.Latch != nil {
		t.Errorf("still latched after the owner's unpair: %+v", st.Latch)
	}
}

// The status's memory figures come from the runtime and are consistent:
// what is live is held, and a collection is counted.
func TestMemoryInfo(t *testing.T) {
	runtime.GC()
	m := memoryInfo()
	if m.HeapLive == 0 || m.Held < m.HeapLive || m.GCs == 0 {
		t.Fatalf("memory %+v: want a live heap, held ≥ live and at least one collection", *m)
	}
	// A goroutine of this test's own, parked: counted, with its stack.
	stop := make(chan struct{})
	parked := make(chan struct{})
	go func() {
		close(parked)
		<-stop
	}()
	<-parked
	after := memoryInfo()
	close(stop)
	if after.Goroutines < 2 || after.Stacks < after.Goroutines*2048 {
		t.Errorf("memory %+v: want every goroutine counted (at least this one and the parked one), with at least 2 KiB of stack each", *after)
	}
}

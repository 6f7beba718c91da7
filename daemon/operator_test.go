package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/latchd/latch/config"
	"github.com/latchd/latch/control"
)

// mintClientEnv makes the test binary act as `latch pair telegram`: a
// control client that mints a code and prints what happened.
const mintClientEnv = "LATCH_TEST_MINT_CLIENT"

func runMintClient() int {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := control.NewClient(config.SocketPath(os.Getenv(config.EnvHome)))
	res, err := c.Mint(ctx, control.MintRequest{Gateway: "telegram"})
	switch {
	case errors.Is(err, control.ErrRefused):
		fmt.Println("REFUSED:", err)
	case err != nil:
		fmt.Println("ERROR:", err)
	default:
		fmt.Println("MINTED", res.Code)
	}
	return 0
}

// TestE2ENoMintFromInsideARun: a command from the chat (or an agent tool)
// runs as the owner's uid, so the uid check alone would let it mint a code
// and read it back. The daemon is a subreaper and refuses descendants —
// directly, and after a setsid double fork.
func TestE2ENoMintFromInsideARun(t *testing.T) {
	e := newEnv(t)
	e.start()
	e.pair()
	client := fmt.Sprintf("%s=1 %s=%s %s", mintClientEnv, config.EnvHome, e.home, os.Args[0])
	e.say(owner, "!"+client)
	direct := e.waitReply(owner.ID, "REFUSED")
	out := e.home + "/escaped.out"
	e.say(owner, fmt.Sprintf("!(setsid sh -c '%s > %s.tmp 2>&1; mv %s.tmp %s' &); for i in $(seq 200); do [ -e %s ] && break; sleep 0.1; done; cat %s", client, out, out, out, out, out))
	forked := e.waitReply(owner.ID, "exit")
	if !strings.Contains(forked.Current(), "REFUSED") {
		t.Errorf("double-forked client: %q", forked.Current())
	}
	for _, m := range []string{direct.Current(), forked.Current()} {
		if strings.Contains(m, "MINTED") {
			t.Fatalf("a command from the chat minted a code: %q", m)
		}
	}
	// The owner's own shell (here: the test process) still can, and the
	// latched chat hears about it.
	e.mint()
	e.waitReply(owner.ID, "pairing code for this bot was minted")
	if st := e.status(); st.Latch == nil {
		t.Fatal("latch lost")
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
}

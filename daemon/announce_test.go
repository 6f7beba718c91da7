package daemon

import (
	"bytes"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/latchd/latch/control"
	"github.com/latchd/latch/pairing"
	"github.com/latchd/latch/store"
)

// TestMintAndUnpairAreAnnouncedInEveryLatchedChat: with Telegram latched
// and Discord not, a code minted for Discord was announced nowhere (only
// a latch of the same gateway heard of its mints). Now a mint for any
// gateway, through the socket or offline, is announced in every latched
// chat, and so is an unpair; the announcement is queued in the mint's own
// transaction. Shown to fail with the announcement sent to the same
// gateway's latch only.
func TestMintAndUnpairAreAnnouncedInEveryLatchedChat(t *testing.T) {
	db, err := store.Open(filepath.Join(t.TempDir(), "latch.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	p, _ := pairing.New(bytes.Repeat([]byte{3}, pairing.KeyLen))
	db.Update(func(tx *store.Tx) error {
		tx.PutLatch(store.Latch{Gateway: "telegram", ChatID: "1", UserID: "1", Since: time.Now()})
		return tx.PutLatch(store.Latch{Gateway: "matrix", ChatID: "2", UserID: "2", Since: time.Now()})
	})
	notices := func() []string {
		var out []string
		db.Update(func(tx *store.Tx) error {
			var seqs []uint64
			tx.ScanInbox(0, func(e store.Entry) bool {
				out = append(out, e.Gateway+"/"+e.ChatID+": "+e.Text)
				seqs = append(seqs, e.Seq)
				return true
			})
			for _, s := range seqs {
				tx.DeleteInbox(s)
			}
			return nil
		})
		slices.Sort(out)
		return out
	}
	res, err := MintOffline(db, p, control.MintRequest{Gateway: "discord"}, nil)
	if err != nil || !res.Approval {
		t.Fatalf("mint for discord: %+v, %v; want a code that needs approval", res, err)
	}
	got := notices()
	if len(got) != 2 || !strings.HasPrefix(got[0], "matrix/2: 🔑") || !strings.HasPrefix(got[1], "telegram/1: 🔑") {
		t.Fatalf("notices after a discord mint: %q; want one in each latched chat", got)
	}
	if old, err := UnpairOffline(db, p, "telegram"); err != nil || old == nil {
		t.Fatalf("unpair: %+v, %v", old, err)
	}
	got = notices()
	if len(got) != 2 || !strings.Contains(got[0], "matrix/2: The telegram bot was unpaired") || !strings.HasPrefix(got[1], "telegram/1: This chat was unpaired") {
		t.Fatalf("notices after the unpair: %q", got)
	}
}

package daemon

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/latchd/latch/config"
	"github.com/latchd/latch/control"
)

func TestSupervisorReload(t *testing.T) {
	e := newEnv(t)
	log := slog.New(slog.NewTextHandler(e.logs, nil))
	ctx, cancel := context.WithCancel(context.Background())
	reload := make(chan struct{})
	done := make(chan error, 1)
	var started []time.Time
	build := func(c *config.Config) *Daemon {
		d := New(c, log, "test")
		d.ShutdownGrace = e.grace
		return d
	}
	load := func() (*config.Config, error) {
		vars := map[string]string{config.EnvTelegramToken: testToken, config.EnvTelegramAPIURL: e.tg.URL()}
		return config.Loader{Getenv: func(k string) string { return vars[k] }}.Load(e.home)
	}
	go func() { done <- Supervise(ctx, e.config(), load, reload, log, build) }()
	waitFor(t, func() bool {
		c, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		st, err := e.client().Status(c)
		if err == nil {
			started = append(started, st.StartedAt)
		}
		return err == nil
	})
	e.pair()

	cfgPath := filepath.Join(e.home, "config.toml")
	os.WriteFile(cfgPath, []byte("[telegram]\nallow_group = true\n"), 0o600)
	reload <- struct{}{}
	waitFor(t, func() bool { return strings.Contains(e.logs.String(), "reload refused") })
	c, stopC := context.WithTimeout(context.Background(), 5*time.Second)
	defer stopC()
	if st, err := e.client().Status(c); err != nil || !st.StartedAt.Equal(started[len(started)-1]) {
		t.Fatalf("an invalid config replaced the running daemon: %+v, %v", st, err)
	}

	os.WriteFile(cfgPath, []byte("[telegram]\nallow_groups = true\n"), 0o600)
	reload <- struct{}{}
	waitFor(t, func() bool { return strings.Contains(e.logs.String(), "configuration reloaded") })
	var st control.Status
	waitFor(t, func() bool {
		c, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		var err error
		st, err = e.client().Status(c)
		return err == nil
	})
	// The uptime `latch status` shows is the process's: a reload used to
	// reset it.
	if !st.StartedAt.Equal(started[0]) {
		t.Errorf("after the reload the daemon says it started at %v, want %v", st.StartedAt, started[0])
	}
	if st := e.status(); st.Latch == nil {
		t.Fatal("the latch was lost in the reload")
	}
	e.say(owner, "!echo after reload")
	e.waitReply(owner.ID, "after reload")

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Supervise: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Supervise did not stop")
	}
}

package daemon

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/latchd/latch/config"
	"github.com/latchd/latch/logkey"
)

// Supervise runs daemons until ctx ends, reloading on every value from
// reload (SIGHUP): the new configuration is loaded and validated first; if
// it is invalid the running daemon keeps going and the error is logged;
// otherwise the running daemon stops gracefully and a new one starts on the
// same home. The latch, sessions and inbox live in the store, so a reload
// loses none of them; the platform cursor makes sure no message is missed.
func Supervise(ctx context.Context, cfg *config.Config, load func() (*config.Config, error),
	reload <-chan struct{}, log *slog.Logger, build func(*config.Config) *Daemon) error {
	since := time.Now()
	for {
		d := build(cfg)
		d.Since = since
		runCtx, stop := context.WithCancelCause(ctx)
		done := make(chan error, 1)
		go func() { done <- d.Run(runCtx) }()
		next, err := waitReload(ctx, reload, done, load, log)
		if next != nil {
			// systemd hears of a reload, not of a stop: STOPPING=1 would
			// have it kill the unit at its stop timeout. The next daemon's
			// READY=1 ends the reload.
			d.notify.Reloading()
			stop(errReloading)
		}
		stop(nil)
		if err != nil { // the daemon ended by itself
			return err
		}
		if next == nil { // ctx ended: a clean stop
			return <-done
		}
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
		log.Info("configuration reloaded")
		cfg = next
	}
}

// errReloading is the cause a daemon's context ends with when a reload
// replaces it.
var errReloading = errors.New("reloading the configuration")

// waitReload waits for a valid new configuration (returned), the end of
// ctx, or the daemon ending by itself (its error returned).
func waitReload(ctx context.Context, reload <-chan struct{}, done <-chan error,
	load func() (*config.Config, error), log *slog.Logger) (*config.Config, error) {
	for {
		select {
		case <-ctx.Done():
			return nil, nil
		case err := <-done:
			if err == nil {
				err = errors.New("the daemon stopped unexpectedly")
			}
			return nil, err
		case <-reload:
			next, err := load()
			if err == nil {
				err = CheckLinked(next)
			}
			if err != nil {
				log.Error("reload refused: the new configuration is invalid; keeping the old one", logkey.Err, err)
				continue
			}
			return next, nil
		}
	}
}

package service

import (
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/coreos/go-systemd/v22/daemon"
	"golang.org/x/sys/unix"
)

// maxStatus bounds a status line: systemctl status shows one line, and the
// text may come from the network (a gateway's last error).
const maxStatus = 512

// Notifier tells systemd about the daemon's state over sd_notify. Outside
// systemd (NOTIFY_SOCKET unset) every method does nothing and returns nil,
// so the daemon can call them unconditionally. The zero value is ready to
// use.
//
// It leaves NOTIFY_SOCKET and WATCHDOG_* in the environment, since it reads
// them on every call. Commands latch starts inherit them, but the unit sets
// NotifyAccess=main, so systemd ignores anything they send.
type Notifier struct{}

// Ready tells systemd that start-up is complete (READY=1); with Type=notify
// systemctl start returns only then.
func (Notifier) Ready() error { return notify(daemon.SdNotifyReady) }

// Stopping tells systemd that shutdown has begun (STOPPING=1). Only the
// end of the process may say so: systemd takes it for a stop and kills the
// unit when its stop timeout runs out, whatever comes after.
func (Notifier) Stopping() error { return notify(daemon.SdNotifyStopping) }

// Reloading tells systemd that a configuration reload has begun
// (RELOADING=1, with the CLOCK_MONOTONIC time systemd uses to match it to
// a reload request); Ready ends it.
func (Notifier) Reloading() error {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return notify(daemon.SdNotifyReloading)
	}
	return notify(daemon.SdNotifyReloading + "\nMONOTONIC_USEC=" + strconv.FormatInt(ts.Nano()/1000, 10))
}

// Watchdog pings the watchdog (WATCHDOG=1); see WatchdogInterval.
func (Notifier) Watchdog() error { return notify(daemon.SdNotifyWatchdog) }

// Status sets the one-line status systemctl status shows (STATUS=...).
// Line breaks and other control characters become spaces, because a newline
// would start a new assignment: a status built from a remote error message
// could otherwise send READY=1 or MAINPID=. The line is cut to 512 bytes.
func (Notifier) Status(line string) error {
	return notify("STATUS=" + statusLine(line))
}

// WatchdogInterval returns how often to call Watchdog: half of WatchdogSec,
// so one late ping is not fatal. It returns false when systemd expects no
// pings from this process (no watchdog, a malformed WATCHDOG_USEC, or
// WATCHDOG_PID naming another process).
func (Notifier) WatchdogInterval() (time.Duration, bool) {
	d, err := daemon.SdWatchdogEnabled(false)
	if err != nil || d <= 0 {
		return 0, false
	}
	return d / 2, true
}

func notify(state string) error {
	_, err := daemon.SdNotify(false, state)
	return err
}

func statusLine(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			return ' '
		}
		return r
	}, s)
	if len(s) <= maxStatus {
		return s
	}
	cut := maxStatus
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

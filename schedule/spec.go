package schedule

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// Schedule says when a recurring job runs.
type Schedule struct {
	spec string
	loc  *time.Location
	// every is a plain interval (30m, @every 2h): real time, no calendar.
	every time.Duration
	cron  *cron.SpecSchedule
	// wall: the hour field is fixed, so the schedule names wall-clock
	// times, which a daylight-saving change can skip or repeat.
	wall bool
}

// minInterval bounds a plain interval: a job every second is a runaway.
const minInterval = time.Minute

// parser reads standard 5-field cron lines and the @daily-style
// descriptors (@yearly, @monthly, @weekly, @daily, @hourly, @every <d>).
var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Parse reads spec: a plain interval ("30m", "2h"), a 5-field cron line
// ("0 9 * * 1-5") or a descriptor ("@daily", "@every 90m"). Calendar
// schedules run in loc.
func Parse(spec string, loc *time.Location) (Schedule, error) {
	spec = strings.Join(strings.Fields(spec), " ")
	s := Schedule{spec: spec, loc: loc}
	if d, err := time.ParseDuration(spec); err == nil {
		s.every = d
	} else {
		if strings.Contains(spec, "TZ=") {
			return Schedule{}, errors.New("a time zone in the schedule is not taken; set [schedule] timezone")
		}
		parsed, err := parser.Parse(spec)
		if err != nil {
			return Schedule{}, fmt.Errorf("schedule %q: %w", spec, err)
		}
		switch p := parsed.(type) {
		case cron.ConstantDelaySchedule:
			s.every = p.Delay
		case *cron.SpecSchedule:
			p.Location = loc
			s.cron = p
			s.wall = p.Hour&(1<<63) == 0 // cron's star bit: "*" in the hour field
		default:
			return Schedule{}, fmt.Errorf("schedule %q: unsupported", spec)
		}
	}
	if s.cron == nil && s.every < minInterval {
		return Schedule{}, fmt.Errorf("schedule %q: an interval must be at least %s", spec, minInterval)
	}
	return s, nil
}

// String is the schedule as written.
func (s Schedule) String() string { return s.spec }

// Next is the first run after t; zero when there is none.
//
// Intervals and cron lines with "*" in the hour field count real time.
// A cron line with a fixed hour names wall-clock times, handled as Vixie
// cron handles them across a daylight-saving change: a time the change
// skips (02:30 when clocks jump from 02:00 to 03:00) runs once, at the
// change; a time the change repeats (01:30 when clocks fall back from
// 02:00 to 01:00) runs once, the first time it comes.
func (s Schedule) Next(t time.Time) time.Time {
	if s.cron == nil {
		return t.Add(s.every).Truncate(time.Second)
	}
	if !s.wall {
		return s.cron.Next(t)
	}
	// In wall-clock terms: the same fields in UTC, which has no changes.
	local := t.In(s.loc)
	wall := time.Date(local.Year(), local.Month(), local.Day(), local.Hour(), local.Minute(), local.Second(), local.Nanosecond(), time.UTC)
	utc := *s.cron
	utc.Location = time.UTC
	for range 1000 {
		nw := utc.Next(wall)
		if nw.IsZero() {
			return nw
		}
		at := s.instant(nw)
		if at.After(t) {
			return at
		}
		wall = nw // repeated wall time: its first instant has passed
	}
	return time.Time{}
}

// instant is the moment the wall-clock time w (fields in UTC) happens in
// s.loc: its first occurrence when clocks fall back, the change itself
// when clocks skip over it.
func (s Schedule) instant(w time.Time) time.Time {
	at := time.Date(w.Year(), w.Month(), w.Day(), w.Hour(), w.Minute(), w.Second(), 0, s.loc)
	if got := at.In(s.loc); got.Hour() == w.Hour() && got.Minute() == w.Minute() && got.Day() == w.Day() {
		// time.Date picks one of a repeated time's two instants; the
		// first is an hour (the change) earlier, when that reads the same.
		if before := at.Add(-time.Hour).In(s.loc); before.Hour() == w.Hour() && before.Minute() == w.Minute() {
			return at.Add(-time.Hour)
		}
		return at
	}
	// Skipped: run at the change. time.Date reads a skipped time with
	// the offset of one side or the other, so the change is the end of
	// the zone period it lands in, or its start.
	start, end := at.ZoneBounds()
	if local := at.In(s.loc); time.Date(local.Year(), local.Month(), local.Day(), local.Hour(), local.Minute(), 0, 0, time.UTC).Before(w) {
		return end
	}
	return start
}

package schedule

import (
	"testing"
	"time"
	_ "time/tzdata" // the DST tests need America/New_York wherever they run
)

func newYork(t *testing.T) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func TestParse(t *testing.T) {
	for _, tt := range []struct {
		spec string
		ok   bool
	}{
		{"30m", true}, {"2h", true}, {"0 9 * * 1-5", true}, {"@daily", true}, {"@hourly", true},
		{"@every 90m", true}, {"*/15 * * * *", true},
		{"10s", false}, {"@every 5s", false}, {"nonsense", false}, {"0 9 * *", false},
		{"CRON_TZ=UTC 0 9 * * *", false}, {"0 0 9 * * *", false}, // six fields: seconds are not taken
	} {
		_, err := Parse(tt.spec, time.UTC)
		if (err == nil) != tt.ok {
			t.Errorf("Parse(%q): err = %v, want ok = %v", tt.spec, err, tt.ok)
		}
	}
}

func TestNext(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse("2006-01-02 15:04:05", s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, tt := range []struct {
		spec, from, want string
	}{
		{"30m", "2026-05-01 10:00:00", "2026-05-01 10:30:00"},
		{"@every 2h", "2026-05-01 10:00:07", "2026-05-01 12:00:07"},
		{"0 9 * * 1-5", "2026-05-01 09:00:00", "2026-05-04 09:00:00"}, // Friday → Monday
		{"@daily", "2026-05-01 10:00:00", "2026-05-02 00:00:00"},
		{"*/15 * * * *", "2026-05-01 10:07:00", "2026-05-01 10:15:00"},
	} {
		s, err := Parse(tt.spec, time.UTC)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Next(at(tt.from)); !got.Equal(at(tt.want)) {
			t.Errorf("%q after %s = %s, want %s", tt.spec, tt.from, got, tt.want)
		}
	}
}

// TestDST: in America/New_York clocks jump from 02:00 to 03:00 on
// 2026-03-08 and fall back from 02:00 to 01:00 on 2026-11-01. A fixed
// time the jump skips runs once, at the change; a fixed time the fall
// repeats runs once; a schedule with "*" in the hour field counts real
// time, so it runs through the repeated hour as the clock shows it.
func TestDST(t *testing.T) {
	ny := newYork(t)
	local := func(y int, m time.Month, d, h, min int) time.Time { return time.Date(y, m, d, h, min, 0, 0, ny) }
	runs := func(spec string, from time.Time, n int) []time.Time {
		s, err := Parse(spec, ny)
		if err != nil {
			t.Fatal(err)
		}
		var out []time.Time
		for t := from; len(out) < n; {
			t = s.Next(t)
			out = append(out, t)
		}
		return out
	}
	check := func(name string, got, want []time.Time) {
		t.Helper()
		for i := range want {
			if !got[i].Equal(want[i]) {
				t.Errorf("%s: run %d = %s, want %s (all: %v)", name, i, got[i].In(ny), want[i].In(ny), got)
			}
		}
	}
	change := time.Date(2026, 3, 8, 7, 0, 0, 0, time.UTC) // 02:00 EST = 03:00 EDT
	check("skipped 02:30", runs("30 2 * * *", local(2026, 3, 7, 12, 0), 3),
		[]time.Time{local(2026, 3, 8, 3, 0), local(2026, 3, 9, 2, 30), local(2026, 3, 10, 2, 30)})
	if !runs("30 2 * * *", local(2026, 3, 7, 12, 0), 1)[0].Equal(change) {
		t.Error("the skipped run is not at the change")
	}
	check("09:00 across the jump", runs("0 9 * * *", local(2026, 3, 7, 12, 0), 2),
		[]time.Time{local(2026, 3, 8, 9, 0), local(2026, 3, 9, 9, 0)})
	first := time.Date(2026, 11, 1, 5, 30, 0, 0, time.UTC) // 01:30 EDT
	check("repeated 01:30", runs("30 1 * * *", local(2026, 10, 31, 12, 0), 2),
		[]time.Time{first, local(2026, 11, 2, 1, 30)})
	// Hourly, real time: 01:00 EDT, 01:00 EST, 02:00 EST.
	check("hourly through the fall", runs("0 * * * *", time.Date(2026, 11, 1, 4, 30, 0, 0, time.UTC), 3),
		[]time.Time{time.Date(2026, 11, 1, 5, 0, 0, 0, time.UTC), time.Date(2026, 11, 1, 6, 0, 0, 0, time.UTC), time.Date(2026, 11, 1, 7, 0, 0, 0, time.UTC)})
	// Intervals are real time: 30 minutes is 30 minutes across a jump.
	check("interval across the jump", runs("30m", time.Date(2026, 3, 8, 6, 45, 0, 0, time.UTC), 1),
		[]time.Time{time.Date(2026, 3, 8, 7, 15, 0, 0, time.UTC)})
}

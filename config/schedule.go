package config

import (
	"fmt"
	"time"
)

// DefaultScheduleCatchUp is how late a scheduled run may still start
// after latch was down.
const DefaultScheduleCatchUp = time.Hour

// ScheduleConfig is [schedule]: how scheduled jobs read time.
type ScheduleConfig struct {
	// Location is schedule.timezone (an IANA name), or the machine's zone.
	Location *time.Location
	// CatchUp: a run due while latch was down starts late if it is at
	// most this late, else it is reported missed (schedule.catch_up).
	CatchUp time.Duration
}

type fileSchedule struct {
	Timezone string `toml:"timezone"`
	CatchUp  string `toml:"catch_up"`
}

var scheduleKeys = []string{"schedule", "schedule.timezone", "schedule.catch_up"}

func defaultSchedule() ScheduleConfig {
	return ScheduleConfig{Location: time.Local, CatchUp: DefaultScheduleCatchUp}
}

// applySchedule checks and copies [schedule].
func applySchedule(cfg *Config, s fileSchedule, bad func(key, format string, args ...any)) {
	if s.Timezone != "" {
		loc, err := time.LoadLocation(s.Timezone)
		if err != nil || s.Timezone == "Local" {
			bad("schedule.timezone", "%q is not a time zone name such as Europe/Paris or UTC", s.Timezone)
		} else {
			cfg.Schedule.Location = loc
		}
	}
	if s.CatchUp != "" {
		d, err := time.ParseDuration(s.CatchUp)
		switch {
		case err != nil:
			bad("schedule.catch_up", "%q is not a duration such as 1h or 30m", s.CatchUp)
		case d < time.Minute || d > 7*24*time.Hour:
			bad("schedule.catch_up", "must be between 1m and 168h, not %s", d)
		default:
			cfg.Schedule.CatchUp = d
		}
	}
}

// String names the schedule's time zone for status output.
func (s ScheduleConfig) String() string {
	return fmt.Sprintf("%s, catch up %s", s.Location, s.CatchUp)
}

package config

import (
	"testing"
	"time"
	_ "time/tzdata"
)

func scheduleFile(body string) *cfgFile {
	return &cfgFile{content: "[schedule]\n" + body + "\n", mode: 0o600}
}

func TestLoadSchedule(t *testing.T) {
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	runLoadTests(t, []loadCase{
		{name: "defaults", want: func(c *Config) {}},
		{name: "zone and catch-up", config: scheduleFile(`timezone = "Europe/Paris"` + "\n" + `catch_up = "30m"`),
			want: func(c *Config) { c.Schedule = ScheduleConfig{Location: paris, CatchUp: 30 * time.Minute} }},
		{name: "unknown zone", config: scheduleFile(`timezone = "Mars/Olympus"`),
			wantErr: []string{`schedule.timezone: "Mars/Olympus" is not a time zone name`}},
		{name: "catch-up too short", config: scheduleFile(`catch_up = "10s"`),
			wantErr: []string{"schedule.catch_up: must be between 1m and 168h"}},
		{name: "unknown key", config: scheduleFile(`zone = "UTC"`), wantErr: []string{"schedule.zone"}},
	})
}

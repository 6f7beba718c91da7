package turnrender

import (
	"fmt"
	"time"
)

// Seconds formats a tool call's duration for its line: 0.4s, 12.3s, 2m05s.
func Seconds(d time.Duration) string {
	if d < time.Minute {
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	d = d.Round(time.Second)
	return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
}

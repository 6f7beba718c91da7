package schedule

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/latchd/latch/gateways"
	"github.com/latchd/latch/store"
)

var _ gateways.Jobs = (*Scheduler)(nil)

// Usage of the chat commands.
const (
	usageEvery = "Usage: /every <schedule> <prompt or !command>\n" +
		"  schedule: an interval (30m, 2h), a cron line (0 9 * * 1-5) or @hourly, @daily, @weekly, @monthly, @every 90m\n" +
		"  e.g. /every 0 8 * * * summarise the news · /every 30m !df -h /"
	usageAt = "Usage: /at <time> <prompt or !command>\n" +
		"  time: 15:04 (next time it comes), 2006-01-02 15:04, tomorrow 15:04, or in 30m\n" +
		"  e.g. /at 18:00 remind me to call Sam"
)

// Command implements gateways.Jobs for the latched chat.
func (s *Scheduler) Command(c gateways.JobCommand) gateways.JobAnswer {
	switch c.Name {
	case "every":
		spec, text, err := SplitEvery(c.Arg)
		if err != nil {
			return answer(err.Error() + "\n\n" + usageEvery)
		}
		return s.added(s.Add(NewJob{Gateway: c.Gateway, ChatID: c.ChatID, Spec: spec, Text: text, By: "chat"}))
	case "at":
		at, text, err := ParseAt(c.Arg, s.cfg.Clock.Now(), s.cfg.Location)
		if err != nil {
			return answer(err.Error() + "\n\n" + usageAt)
		}
		return s.added(s.Add(NewJob{Gateway: c.Gateway, ChatID: c.ChatID, At: at, Text: text, By: "chat"}))
	case "jobs":
		return answer(s.jobsCommand(c))
	case "cancel":
		id, err := parseID(c.Arg)
		if err != nil {
			return answer("Usage: /cancel <id> (/jobs lists them)")
		}
		if _, err := s.Remove(c.Gateway, id); err != nil {
			return answer(chatError(err))
		}
		return gateways.JobAnswer{Text: fmt.Sprintf("Job #%d cancelled.", id), Cancelled: id}
	}
	return answer("Unknown command /" + c.Name + ".")
}

func answer(text string) gateways.JobAnswer { return gateways.JobAnswer{Text: text} }

func (s *Scheduler) added(j store.Job, err error) gateways.JobAnswer {
	if err != nil {
		return answer(chatError(err))
	}
	return answer(fmt.Sprintf("⏰ Job #%d: %s — next run %s.\n%s\n/cancel %d removes it.",
		j.ID, describe(j), s.when(j.Next), j.Text, j.ID))
}

func (s *Scheduler) jobsCommand(c gateways.JobCommand) string {
	arg := strings.Fields(c.Arg)
	if len(arg) > 0 && arg[0] == "resume" {
		var id uint64
		if len(arg) > 1 {
			var err error
			if id, err = parseID(arg[1]); err != nil {
				return "Usage: /jobs resume [id]"
			}
		}
		jobs, err := s.Resume(c.Gateway, id)
		if err != nil {
			return chatError(err)
		}
		if len(jobs) == 0 {
			return "No job is paused."
		}
		var b strings.Builder
		fmt.Fprintf(&b, "Resumed %s:", plural(uint64(len(jobs)), "job"))
		for _, j := range jobs {
			b.WriteString("\n" + s.Line(j))
		}
		return b.String()
	}
	if len(arg) > 0 {
		return "Usage: /jobs, or /jobs resume [id]"
	}
	jobs, err := s.Jobs(c.Gateway)
	if err != nil {
		return chatError(err)
	}
	if len(jobs) == 0 {
		return "No scheduled jobs. /every and /at make one."
	}
	var b strings.Builder
	b.WriteString("Scheduled jobs (" + s.cfg.Location.String() + "):")
	for _, j := range jobs {
		b.WriteString("\n" + s.Line(j))
	}
	return b.String()
}

// Line is one job as `/jobs` and `latch jobs list` show it.
func (s *Scheduler) Line(j store.Job) string {
	state := "next " + s.when(j.Next)
	if j.Paused != "" {
		state = "⏸ paused (" + j.Paused + ")"
	}
	return fmt.Sprintf("#%d · %s · %s · %s", j.ID, describe(j), state, clip(j.Text, 80))
}

func (s *Scheduler) when(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return t.In(s.cfg.Location).Format("Mon 2 Jan 15:04 MST")
}

// chatError is what the chat is told of err: only the messages written
// for it, never a store error's internals.
func chatError(err error) string {
	switch {
	case errors.Is(err, ErrNoJob):
		return "No such job. /jobs lists them."
	case errors.Is(err, ErrNotLatched):
		return "This chat is not the one the bot is paired with."
	case IsUserError(err):
		return err.Error()
	}
	return "Could not do that; see the daemon's log."
}

// userError is an error written for the owner (a bad schedule or time).
type userError struct{ msg string }

func (e *userError) Error() string { return e.msg }

// IsUserError reports whether err is written for the owner: a schedule,
// time or text that is not valid.
func IsUserError(err error) bool { return errors.As(err, new(*userError)) }

func userErrorf(format string, args ...any) error {
	return &userError{fmt.Sprintf(format, args...)}
}

func parseID(s string) (uint64, error) {
	return strconv.ParseUint(strings.TrimPrefix(strings.TrimSpace(s), "#"), 10, 64)
}

// isCommand: the text is a !command.
func isCommand(text string) bool { return strings.HasPrefix(strings.TrimSpace(text), "!") }

// SplitEvery cuts "/every"'s argument into the schedule and the text: an
// interval or a descriptor is one word (@every two), a cron line five.
func SplitEvery(arg string) (spec, text string, err error) {
	words := strings.Fields(arg)
	if len(words) == 0 {
		return "", "", errors.New("no schedule given")
	}
	n := 5
	switch first := words[0]; {
	case first == "@every":
		n = 2
	case strings.HasPrefix(first, "@"):
		n = 1
	default:
		// "0" parses as a duration too, and begins many a cron line.
		if _, err := time.ParseDuration(first); err == nil && unicode.IsLetter(rune(first[len(first)-1])) {
			n = 1
		}
	}
	spec, text, ok := cutWords(arg, n)
	if !ok {
		return "", "", errors.New("the schedule is incomplete")
	}
	return spec, text, nil
}

// cutWords splits s after its first n words; the rest keeps its spacing
// (a multi-line prompt stays as written) less the blanks around it.
func cutWords(s string, n int) (head, rest string, ok bool) {
	rest = s
	var words []string
	for range n {
		rest = strings.TrimLeftFunc(rest, unicode.IsSpace)
		if rest == "" {
			return "", "", false
		}
		end := strings.IndexFunc(rest, unicode.IsSpace)
		if end < 0 {
			end = len(rest)
		}
		words = append(words, rest[:end])
		rest = rest[end:]
	}
	return strings.Join(words, " "), strings.TrimSpace(rest), true
}

// Time reads a time alone, in the forms /at takes, for the machine's and
// the agent's one-shot jobs.
func (s *Scheduler) Time(at string) (time.Time, error) {
	t, rest, err := ParseAt(at+" x", s.cfg.Clock.Now(), s.cfg.Location)
	if err != nil || rest != "x" {
		return time.Time{}, userErrorf("%q is not a time (15:04, 2006-01-02 15:04, tomorrow 15:04, in 30m)", at)
	}
	return t, nil
}

// ParseAt reads "/at"'s argument: the time, then the text. A time of day
// alone means the next time it comes, in loc.
func ParseAt(arg string, now time.Time, loc *time.Location) (time.Time, string, error) {
	now = now.In(loc)
	if head, rest, ok := cutWords(arg, 2); ok {
		w := strings.Fields(head)
		if w[0] == "in" {
			d, err := time.ParseDuration(w[1])
			if err != nil || d <= 0 {
				return time.Time{}, "", userErrorf("%q is not a duration like 30m or 2h", w[1])
			}
			return now.Add(d), rest, nil
		}
		if t, err := time.ParseInLocation("2006-01-02 15:04", head, loc); err == nil {
			return t, rest, nil
		}
		if w[0] == "tomorrow" {
			if c, err := time.ParseInLocation("15:04", w[1], loc); err == nil {
				d := now.AddDate(0, 0, 1)
				return time.Date(d.Year(), d.Month(), d.Day(), c.Hour(), c.Minute(), 0, 0, loc), rest, nil
			}
		}
	}
	head, rest, ok := cutWords(arg, 1)
	if !ok {
		return time.Time{}, "", errors.New("no time given")
	}
	if t, err := time.ParseInLocation("2006-01-02T15:04", head, loc); err == nil {
		return t, rest, nil
	}
	if t, err := time.Parse(time.RFC3339, head); err == nil {
		return t, rest, nil
	}
	c, err := time.ParseInLocation("15:04", head, loc)
	if err != nil {
		return time.Time{}, "", userErrorf("%q is not a time", head)
	}
	t := time.Date(now.Year(), now.Month(), now.Day(), c.Hour(), c.Minute(), 0, 0, loc)
	if !t.After(now) {
		t = time.Date(now.Year(), now.Month(), now.Day()+1, c.Hour(), c.Minute(), 0, 0, loc)
	}
	return t, rest, nil
}

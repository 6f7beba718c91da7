// Package doctor owns `latch doctor`: a list of checks of everything latch
// needs — its home directory, config, key file, database, daemon,
// workspace, Telegram bot token, model provider and systemd unit — each
// ending in a status and, when something is wrong, the exact step that
// fixes it.
//
// Every outside thing (environment, HTTP, external commands, the unit file
// locations, the clock) is a field of [Doctor], so tests run it against
// protocol fakes. No check prints a secret: the bot token and the API key
// are scrubbed from every line of the [Report], whatever a library put in
// its error.
package doctor

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/latchd/latch/config"
	"github.com/latchd/latch/control"
	"github.com/latchd/latch/service"
)

// Status is the outcome of one check.
type Status string

// The outcomes. Only Fail makes a report not OK.
const (
	OK   Status = "ok"
	Fail Status = "fail"
	Warn Status = "warn" // works, but something deserves attention
	Skip Status = "skip" // not checked: nothing to check, or it depends on a check that failed
)

// Check is the result of one check. Fix is what to run or change; it is
// set for every Fail and for most Warns.
type Check struct {
	Name   string `json:"name"`
	Status Status `json:"status"`
	Detail string `json:"detail"`
	Fix    string `json:"fix"`
}

// Report is the result of a run, in the order the checks ran.
type Report struct {
	OK     bool    `json:"ok"` // no check failed
	Checks []Check `json:"checks"`
}

// DefaultTimeout is how long a check that waits on the network or on
// another process may take when Doctor.Timeout is zero. One that hangs must
// not hang doctor.
const DefaultTimeout = 10 * time.Second

// localTimeout bounds the checks of local files.
const localTimeout = 5 * time.Second

// Doctor runs the checks. The zero value checks the real machine.
type Doctor struct {
	// Home is $LATCH_HOME; empty means the one the environment names
	// (config.Loader.HomeDir).
	Home string
	// Getenv looks up an environment variable; nil means os.Getenv.
	Getenv func(string) string
	// Runner runs systemctl and loginctl; nil means service.Exec.
	Runner service.Runner
	// HTTPClient makes the requests to the Bot API and the model provider;
	// nil means a client with no timeout of its own (each check has one).
	HTTPClient *http.Client
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// UnitPath says where latch.service is installed for the user
	// (system=false) and the system; nil means service.UnitPath.
	UnitPath func(system bool) (string, error)
	// Timeout bounds each check that talks to the network, the daemon or
	// systemd; zero means DefaultTimeout.
	Timeout time.Duration
}

// run is the state one Run shares between its checks: later checks build
// on what earlier ones found.
type run struct {
	d        *Doctor
	home     string
	homeErr  error          // the home directory could not even be named
	cfg      *config.Config // nil when config.toml did not load
	daemonUp bool           // the control socket answered
	daemon   control.Status // what it answered, when daemonUp
	bot      *botState      // set by the telegram check when getMe worked
}

// step is one check in the order they run.
type step struct {
	name    string
	network bool // waits on something outside this process: Doctor.Timeout
	fn      func(r *run, ctx context.Context) Check
}

var steps = []step{
	{"home", false, (*run).checkHome},
	{"config", false, (*run).checkConfig},
	{"secret", false, (*run).checkSecret},
	{"database", false, (*run).checkDatabase},
	{"daemon", true, (*run).checkDaemon},
	{"workspace", false, (*run).checkWorkspace},
	{"telegram", true, (*run).checkTelegram},
	{"webhook", true, (*run).checkWebhook},
	{"slack", true, (*run).checkSlack},
	{"matrix", true, (*run).checkMatrix},
	{"model", true, (*run).checkModel},
	{"mcp", true, (*run).checkMCP},
	{"service", true, (*run).checkService},
}

// Run runs every check in order and returns the report. It never fails
// as a whole: whatever goes wrong is a check's result.
func (d *Doctor) Run(ctx context.Context) Report {
	r := &run{d: d, home: d.Home}
	if r.home == "" {
		r.home, r.homeErr = config.Loader{Getenv: d.getenv}.HomeDir()
	}
	rep := Report{OK: true}
	for _, s := range steps {
		c := r.runStep(ctx, s)
		c.Name = s.name
		c.Detail, c.Fix = oneLine(r.scrub(c.Detail)), oneLine(r.scrub(c.Fix))
		if c.Status == Fail {
			rep.OK = false
		}
		rep.Checks = append(rep.Checks, c)
	}
	return rep
}

// runStep runs one check with its timeout. A panic in a library under a
// check becomes that check's failure: a doctor that crashes tells nothing.
func (r *run) runStep(ctx context.Context, s step) (c Check) {
	timeout := localTimeout
	if s.network {
		timeout = r.d.timeout()
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	defer func() {
		if p := recover(); p != nil {
			c = Check{Status: Fail, Detail: fmt.Sprintf("the check crashed: %v", p),
				Fix: "report this as a bug in latch"}
		}
	}()
	return s.fn(r, ctx)
}

func (d *Doctor) getenv(key string) string {
	if d.Getenv == nil {
		return os.Getenv(key)
	}
	return d.Getenv(key)
}

func (d *Doctor) now() time.Time {
	if d.Now == nil {
		return time.Now()
	}
	return d.Now()
}

func (d *Doctor) runner() service.Runner {
	if d.Runner == nil {
		return service.Exec
	}
	return d.Runner
}

func (d *Doctor) unitPath(system bool) (string, error) {
	if d.UnitPath == nil {
		return service.UnitPath(system)
	}
	return d.UnitPath(system)
}

func (d *Doctor) timeout() time.Duration {
	if d.Timeout <= 0 {
		return DefaultTimeout
	}
	return d.Timeout
}

// httpClient returns a copy of the configured client with the timeout as
// its own deadline, so a library that ignores contexts still gives up.
func (d *Doctor) httpClient() *http.Client {
	timeout := d.timeout()
	c := &http.Client{}
	if d.HTTPClient != nil {
		cp := *d.HTTPClient
		c = &cp
	}
	if c.Timeout == 0 || c.Timeout > timeout {
		c.Timeout = timeout
	}
	return c
}

// minSecretLen keeps scrubbing from mangling text around a placeholder of a
// few letters; real tokens and keys are far longer.
const minSecretLen = 8

// secrets lists every form in which a secret could show up in an error: as
// configured, as the environment has it, URL-escaped, and the part of a
// bot token after its colon.
func (r *run) secrets() []string {
	var raw []string
	vars := []string{config.EnvAnthropicAPIKey, config.EnvOpenAIAPIKey}
	if r.cfg != nil {
		raw = append(config.PlatformSecrets(r.cfg), r.cfg.Agent.APIKey)
	}
	for _, p := range config.Platforms {
		for _, s := range p.Secrets {
			if s.Env != "" {
				vars = append(vars, s.Env)
			}
		}
	}
	for _, name := range vars {
		v := r.d.getenv(name)
		raw = append(raw, v, strings.TrimSpace(v))
	}
	var out []string
	for _, s := range raw {
		_, after, _ := strings.Cut(s, ":")
		out = append(out, s, url.PathEscape(s), url.QueryEscape(s), after)
	}
	return out
}

// scrub replaces every secret in s.
func (r *run) scrub(s string) string {
	for _, sec := range r.secrets() {
		if len(sec) >= minSecretLen {
			s = strings.ReplaceAll(s, sec, "[redacted]")
		}
	}
	return s
}

// oneLine joins the lines of a message that holds several errors
// (errors.Join puts each on its own line): a check is one line.
func oneLine(s string) string {
	return strings.ReplaceAll(strings.TrimSpace(s), "\n", "; ")
}

// fail, warn, ok and skip build a Check.
func fail(detail, fix string) Check { return Check{Status: Fail, Detail: detail, Fix: fix} }
func warn(detail, fix string) Check { return Check{Status: Warn, Detail: detail, Fix: fix} }
func ok(detail string) Check        { return Check{Status: OK, Detail: detail} }
func skip(detail string) Check      { return Check{Status: Skip, Detail: detail} }

// fixMarker is how config's errors say what fixes them.
const fixMarker = "; fix it with: "

// splitFix splits an error from config into what is wrong and the command
// that fixes it, when the message carries one.
func splitFix(msg string) (detail, fix string, found bool) {
	detail, fix, found = strings.Cut(msg, fixMarker)
	return detail, fix, found
}

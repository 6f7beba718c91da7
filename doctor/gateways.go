package doctor

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/latchd/latch/config"
	"github.com/latchd/latch/control"
	"github.com/latchd/latch/service"
)

// configuredGateway is a gateway the config doctor loaded turns on.
type configuredGateway struct {
	name   string             // as the daemon names it
	secret *service.EnvSecret // set when its token came from the environment
}

// configuredGateways lists the gateways cfg turns on.
func configuredGateways(cfg *config.Config) []configuredGateway {
	fromEnv := make(map[string]service.EnvSecret)
	for _, s := range service.EnvSecrets(cfg) {
		fromEnv[s.Var] = s
	}
	var out []configuredGateway
	add := func(name, envVar string) {
		g := configuredGateway{name: name}
		if s, ok := fromEnv[envVar]; ok {
			g.secret = &s
		}
		out = append(out, g)
	}
	for _, p := range config.Platforms {
		if p.Settings(cfg).Enabled() {
			add(p.Name, p.TokenEnv)
		}
	}
	if cfg.Slack.Enabled() {
		add("slack", config.EnvSlackBotToken)
	}
	return out
}

// missingGateways fails the daemon check when a gateway the config turns
// on is not among the running daemon's: doctor's checks of that gateway
// would pass while the daemon cannot use it, and latch pair would fail with
// "unknown gateway". The usual cause is a token in the shell's environment
// that the service never got.
func (r *run) missingGateways(ctx context.Context, st control.Status, detail string) (Check, bool) {
	running := make(map[string]bool)
	for _, g := range st.Gateways {
		running[g.Name] = true
	}
	var names []string
	var secrets []service.EnvSecret
	for _, g := range configuredGateways(r.cfg) {
		if running[g.name] {
			continue
		}
		names = append(names, g.name)
		if g.secret != nil {
			secrets = append(secrets, *g.secret)
		}
	}
	if len(names) == 0 {
		return Check{}, false
	}
	gateway := "gateway"
	if len(names) > 1 {
		gateway = "gateways"
	}
	detail = fmt.Sprintf("%s without the %s %s that %s turns on: latch pair %s fails with \"unknown gateway\"",
		detail, strings.Join(names, " and "), gateway, r.cfg.Path, names[0])
	system, underUnit := r.unitOf(ctx, st.PID)
	systemctl := systemctlFor(system)
	var fix string
	switch {
	case len(secrets) > 0 && underUnit:
		fix = fmt.Sprintf("latch.service does not get %s, which comes from this shell's environment: %s",
			varNames(secrets), envFix(secrets, r.cfg.Path, systemctl))
	case len(secrets) > 0:
		fix = fmt.Sprintf("the running latch (pid %d) was started without %s: stop it and start latch run again where %s is set, "+
			"or put it in a file (chmod 600) named by %s in %s", st.PID, varNames(secrets), varNames(secrets), fileKeys(secrets), r.cfg.Path)
	case underUnit:
		fix = fmt.Sprintf("the config changed since latch started: %s reload %s", systemctl, service.UnitName)
	default:
		fix = fmt.Sprintf("the config changed since latch started: restart latch run, or reload it with kill -HUP %d", st.PID)
	}
	return fail(detail, fix), true
}

// unitOf reports whether the daemon with pid is latch.service's main
// process, and in which service manager.
func (r *run) unitOf(ctx context.Context, pid int) (system, found bool) {
	for _, system := range []bool{false, true} {
		path, err := r.d.unitPath(system)
		if err != nil || !exists(path) {
			continue
		}
		args := []string{"--user", "show", service.UnitName, "-p", "MainPID", "--value"}
		if system {
			args = args[1:]
		}
		var out bytes.Buffer
		err = r.d.runner()(ctx, service.Command{Name: "systemctl", Args: args, Stdout: &out})
		if err == nil && strings.TrimSpace(out.String()) == strconv.Itoa(pid) {
			return system, true
		}
	}
	return false, false
}

// unitEnv warns when this shell's environment supplies a token or API key
// that the installed unit does not pass to latch, and config.toml has no
// other source for it: the service runs without it, whatever the checks
// that use doctor's own environment say. It warns too when an API URL
// (LATCH_TELEGRAM_API_URL, OPENAI_BASE_URL, …) comes from this shell only:
// the service then talks to another server than the checks did, and sends
// it the chat. It says nothing when it cannot tell.
func (r *run) unitEnv(ctx context.Context, system bool) (Check, bool) {
	if r.cfg == nil || !r.fromEnv() {
		return Check{}, false
	}
	m := &service.Manager{System: system, Run: r.d.runner()}
	env, err := m.Environment(ctx)
	if err != nil {
		return Check{}, false
	}
	systemctl := systemctlFor(system)
	var parts []Check
	if lacking, err := service.LackingSecrets(r.home, r.d.getenv, env); err == nil && len(lacking) > 0 {
		var whats []string
		for _, s := range lacking {
			whats = append(whats, s.What)
		}
		parts = append(parts, warn(fmt.Sprintf("this shell sets %s, but latch.service does not get it: the service runs without %s",
			varNames(lacking), strings.Join(whats, " and ")), envFix(lacking, r.cfg.Path, systemctl)))
	}
	if lacking, err := service.LackingSettings(r.home, r.d.getenv, env); err == nil && len(lacking) > 0 {
		parts = append(parts, settingsWarning(lacking, r.cfg.Path, systemctl))
	}
	if len(parts) == 0 {
		return Check{}, false
	}
	return merge(parts), true
}

// fromEnv reports whether this shell's environment supplies a secret or
// an API URL, that is, whether asking systemd what the unit gets is worth
// it.
func (r *run) fromEnv() bool {
	if len(service.EnvSecrets(r.cfg)) > 0 {
		return true
	}
	for _, v := range service.EnvSettingVars() {
		if r.d.getenv(v) != "" {
			return true
		}
	}
	return false
}

// settingsWarning says which API URLs latch.service does not share with
// this shell, and how to give it them. It names the variables, never their
// values: a URL may carry a credential.
func settingsWarning(lacking []service.EnvSetting, cfgPath, systemctl string) Check {
	var vars, whats, keys []string
	for _, s := range lacking {
		vars = append(vars, s.Var)
		if !slices.Contains(whats, s.What) {
			whats, keys = append(whats, s.What), append(keys, s.Key)
		}
	}
	names := strings.Join(vars, " and ")
	return warn(fmt.Sprintf("this shell sets %s, but latch.service does not get it: the service uses another %s "+
		"(config.toml's or the default) and sends it the chat", names, strings.Join(whats, " and ")),
		fmt.Sprintf("set %s in %s to what printenv %s prints, or give the service an EnvironmentFile= that sets %s "+
			"(%s edit %s; [Service] EnvironmentFile=FILE), then %s restart %s",
			strings.Join(keys, " and "), cfgPath, names, names, systemctl, service.UnitName, systemctl, service.UnitName))
}

// envFix says how to give the service secrets it lacks.
func envFix(secrets []service.EnvSecret, cfgPath, systemctl string) string {
	return fmt.Sprintf("put it in a file (chmod 600) named by %s in %s, or give the service an EnvironmentFile= that sets %s "+
		"(%s edit %s; [Service] EnvironmentFile=FILE), then %s restart %s",
		fileKeys(secrets), cfgPath, varNames(secrets), systemctl, service.UnitName, systemctl, service.UnitName)
}

func systemctlFor(system bool) string {
	if system {
		return "sudo systemctl"
	}
	return "systemctl --user"
}

func varNames(secrets []service.EnvSecret) string {
	var v []string
	for _, s := range secrets {
		v = append(v, s.Var)
	}
	return strings.Join(v, " and ")
}

func fileKeys(secrets []service.EnvSecret) string {
	var v []string
	for _, s := range secrets {
		v = append(v, s.FileKey)
	}
	return strings.Join(v, " and ")
}

// endpointDrift warns when the running daemon talks to another API server
// than this shell's configuration names: doctor's own checks then tested a
// server the daemon does not use, and the daemon sends the chat (or the
// model's context) somewhere the owner may not expect. Only hosts are
// shown: a path may hold a key.
func (r *run) endpointDrift(ctx context.Context, st control.Status, detail string) (Check, bool) {
	if r.cfg == nil || len(st.Endpoints) == 0 {
		return Check{}, false
	}
	// Status.Endpoints is keyed by gateway name, and EndpointModel.
	shell := map[string]string{control.EndpointModel: r.cfg.Agent.ModelURL()}
	what := map[string]string{control.EndpointModel: "the model API"}
	key := map[string]string{control.EndpointModel: "[agent] base_url"}
	var names []string
	for _, p := range config.Platforms {
		if s := p.Settings(r.cfg); s.Enabled() {
			shell[p.Name] = s.APIURL
		}
		what[p.Name], key[p.Name] = p.APIName, "["+p.Name+"] api_url"
		names = append(names, p.Name)
	}
	var parts, keys []string
	for _, name := range append(names, control.EndpointModel) {
		daemon, mine := st.Endpoints[name], shell[name]
		if daemon == "" || mine == "" || daemon == mine {
			continue
		}
		where := "at " + hostOf(daemon) + ", this shell's configuration at " + hostOf(mine)
		if hostOf(daemon) == hostOf(mine) {
			where = "at another path on " + hostOf(mine) + " than this shell's configuration"
		}
		parts = append(parts, fmt.Sprintf("it reaches %s %s", what[name], where))
		keys = append(keys, key[name])
	}
	if len(parts) == 0 {
		return Check{}, false
	}
	fix := fmt.Sprintf("make them agree: set %s in %s (a variable of this shell wins over it), then restart latch", strings.Join(keys, " and "), r.cfg.Path)
	if system, underUnit := r.unitOf(ctx, st.PID); underUnit {
		fix = fmt.Sprintf("make them agree: set %s in %s, or give latch.service the same variables (%s edit %s), then %s restart %s",
			strings.Join(keys, " and "), r.cfg.Path, systemctlFor(system), service.UnitName, systemctlFor(system), service.UnitName)
	}
	return warn(detail+"; "+strings.Join(parts, "; "), fix), true
}

// hostOf is the host (and port) of an API URL, for messages.
func hostOf(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.Host != "" {
		return u.Host
	}
	return "an unparsable URL"
}

// daemonGateways describes the running daemon's gateways as it sees them,
// noting each that this shell's config does not turn on: its token then
// comes from the service's environment or a config the daemon loaded
// before it changed, and the checks doctor makes from this shell cannot
// see it.
func (r *run) daemonGateways(st control.Status) string {
	var parts []string
	for _, g := range st.Gateways {
		if !g.Configured {
			continue
		}
		s := g.Name + " " + gatewayState(g)
		if r.cfg != nil && !slices.ContainsFunc(configuredGateways(r.cfg), func(c configuredGateway) bool { return c.name == g.Name }) {
			s += " (this shell's config does not turn it on: no token here)"
		}
		parts = append(parts, s)
	}
	if len(parts) == 0 {
		return ""
	}
	return "; the daemon's gateways: " + strings.Join(parts, ", ")
}

// gatewayState is a running gateway's state in a few words.
func gatewayState(g control.GatewayStatus) string {
	s := "not connected"
	if g.Connected {
		s = "connected"
	}
	if g.BotName != "" {
		s += " as @" + g.BotName
	}
	if !g.Connected && g.LastError != "" {
		s += " (" + g.LastError + ")"
	}
	return s
}

// daemonGateway returns the running daemon's view of a gateway it runs.
func (r *run) daemonGateway(name string) (control.GatewayStatus, bool) {
	if !r.daemonUp {
		return control.GatewayStatus{}, false
	}
	for _, g := range r.daemon.Gateways {
		if g.Name == name && g.Configured {
			return g, true
		}
	}
	return control.GatewayStatus{}, false
}

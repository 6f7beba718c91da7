package doctor

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"strings"

	"github.com/latchd/latch/service"
)

// checkService looks for latch.service in the user's and the system's
// service manager and asks systemd whether it is enabled; for a user unit
// also whether the user manager outlives the login (lingering); and for
// both whether the unit gets the token or API key that doctor found in its
// own environment.
func (r *run) checkService(ctx context.Context) Check {
	userPath, uerr := r.d.unitPath(false)
	sysPath, serr := r.d.unitPath(true)
	userInstalled := uerr == nil && exists(userPath)
	sysInstalled := serr == nil && exists(sysPath)
	if !userInstalled && !sysInstalled {
		err := r.d.runner()(ctx, service.Command{Name: "systemctl", Args: []string{"--version"}})
		if errors.Is(err, service.ErrNoSystemd) {
			return skip("no systemd here (systemctl not found); run latch under your own supervisor")
		}
		return warn("latch.service is not installed: latch runs only while you keep latch run going",
			"latch service install")
	}
	var parts []Check
	if sysInstalled {
		parts = append(parts, r.unitState(ctx, true, sysPath))
		if c, found := staleHardening(true, sysPath); found {
			parts = append(parts, c)
		}
		if c, found := r.unitEnv(ctx, true); found {
			parts = append(parts, c)
		}
	}
	if userInstalled {
		c := r.unitState(ctx, false, userPath)
		parts = append(parts, c)
		if c, found := staleHardening(false, userPath); found {
			parts = append(parts, c)
		}
		if c.Status == OK {
			if l, found := r.linger(ctx); found {
				parts = append(parts, l)
			}
		}
		if c, found := r.unitEnv(ctx, false); found {
			parts = append(parts, c)
		}
	}
	if userInstalled && sysInstalled {
		parts = append(parts, warn("both a user and a system unit are installed; the second latch to start finds the database taken",
			"keep one: latch service uninstall (the user unit) or sudo latch service uninstall --system"))
	}
	return merge(parts)
}

// staleHardening reports a hardened unit written by a latch from before
// hardened units set ProtectControlGroups=: ProtectKernelTunables= alone
// leaves the cgroup tree writable, so the commands latch runs may make
// cgroups or move processes outside latch's own cgroup (in a user
// service, anywhere in the user's tree). Installing again rewrites it.
func staleHardening(system bool, path string) (Check, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Check{}, false
	}
	lines := map[string]bool{}
	user := ""
	for line := range strings.SplitSeq(string(b), "\n") {
		line = strings.TrimSpace(line)
		lines[line] = true
		if u, found := strings.CutPrefix(line, "User="); found {
			user = u
		}
	}
	if !lines["ProtectKernelTunables=yes"] || lines["ProtectControlGroups=yes"] {
		return Check{}, false
	}
	kind, fix := "user unit", "latch service install --harden"
	if system {
		kind, fix = "system unit", "sudo latch service install --system --user "+cmp.Or(user, "NAME")+" --harden"
	}
	return warn(fmt.Sprintf("%s %s was hardened by an older latch: the commands it runs may write the cgroup tree outside latch's own cgroup", kind, path), fix), true
}

// unitState asks systemctl is-enabled about one installed unit.
func (r *run) unitState(ctx context.Context, system bool, path string) Check {
	kind, systemctl := "user unit", "systemctl --user"
	args := []string{"--user", "is-enabled", service.UnitName}
	if system {
		kind, systemctl = "system unit", "sudo systemctl"
		args = args[1:]
	}
	var out, errOut bytes.Buffer
	err := r.d.runner()(ctx, service.Command{Name: "systemctl", Args: args, Stdout: &out, Stderr: &errOut})
	if errors.Is(err, service.ErrNoSystemd) {
		return skip(fmt.Sprintf("%s %s is installed, but systemctl is not found", kind, path))
	}
	// is-enabled exits non-zero for every state but the enabled ones, so
	// the state it prints is what counts.
	state, _, _ := strings.Cut(strings.TrimSpace(out.String()), "\n")
	switch state {
	case "enabled", "enabled-runtime", "static", "indirect", "generated", "alias":
		return ok(fmt.Sprintf("%s %s, %s", kind, path, state))
	case "disabled", "linked", "linked-runtime":
		return warn(fmt.Sprintf("%s %s is %s: it does not start at boot or login", kind, path, state),
			systemctl+" enable --now "+service.UnitName)
	case "masked", "masked-runtime":
		return warn(fmt.Sprintf("%s %s is masked: systemd will not start it", kind, path),
			fmt.Sprintf("%s unmask %s && %s enable --now %s", systemctl, service.UnitName, systemctl, service.UnitName))
	case "":
		why := strings.TrimSpace(errOut.String())
		if why == "" && err != nil {
			why = err.Error()
		}
		why, _, _ = strings.Cut(why, "\n")
		return warn(fmt.Sprintf("%s %s is installed, but systemd could not say whether it is enabled: %s", kind, path, why),
			systemctl+" status "+service.UnitName)
	}
	return warn(fmt.Sprintf("%s %s: systemd says %q", kind, path, state), systemctl+" enable --now "+service.UnitName)
}

// linger reports a user manager that stops at logout, which takes latch
// down with it. found is false when loginctl cannot tell.
func (r *run) linger(ctx context.Context) (c Check, found bool) {
	name := r.userName()
	var out bytes.Buffer
	err := r.d.runner()(ctx, service.Command{
		Name: "loginctl", Args: []string{"show-user", name, "-p", "Linger"}, Stdout: &out,
	})
	switch v := strings.TrimSpace(out.String()); {
	case err != nil:
		return Check{}, false
	case v == "Linger=yes":
		return ok("lingering"), true
	case v == "Linger=no":
		return warn("user services stop when you log out and start only when you log in",
			"sudo loginctl enable-linger "+name), true
	}
	return Check{}, false
}

// userName names the user for loginctl: $USER, then the account
// database, then the numeric uid, which loginctl also takes.
func (r *run) userName() string {
	if u := r.d.getenv("USER"); u != "" {
		return u
	}
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return strconv.Itoa(os.Getuid())
}

// rank orders statuses by how much they matter in a merged check.
var rank = map[Status]int{Skip: 0, OK: 1, Warn: 2, Fail: 3}

// merge makes one check of several findings: the worst status, every
// detail and every fix.
func merge(parts []Check) Check {
	var c Check
	var details, fixes []string
	for i, p := range parts {
		if i == 0 || rank[p.Status] > rank[c.Status] {
			c.Status = p.Status
		}
		details = append(details, p.Detail)
		if p.Fix != "" {
			fixes = append(fixes, p.Fix)
		}
	}
	c.Detail = strings.Join(details, "; ")
	c.Fix = strings.Join(fixes, "; ")
	return c
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

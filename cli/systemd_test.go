//go:build linux

package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/latchd/latch/gateways/telegram/telegramtest"
)

// TestMain lets this test binary stand in for latch: started under the
// name "latch" it is latch, so a real service manager can run it.
func TestMain(m *testing.M) {
	if filepath.Base(os.Args[0]) == "latch" {
		os.Exit(Main(os.Args[1:], os.Stdout, os.Stderr))
	}
	if os.Getenv(hardenChildEnv) == "1" {
		os.Exit(hardenChild())
	}
	os.Exit(m.Run())
}

// TestServiceUnderRealSystemd installs latch with `latch service install
// --system --user nobody` into a real systemd, booted as PID 1 of PID,
// mount and cgroup namespaces of the test's own (its units, /run and
// /etc/systemd/system are private to it, and what the boot would change
// on the machine is masked), and checks what only a real service manager
// can show: Type=notify readiness and status line, Delegate=yes giving the
// unprivileged service a cgroup it may split (a command that escapes its
// session is still killed), reload without a restart, a stop that lets
// latch end a running command within TimeoutStopSec, watchdog pings, and
// the same under
// --harden (ProtectSystem=full, ProtectControlGroups= and the
// ReadWritePaths= that opens latch's own cgroup again).
func TestServiceUnderRealSystemd(t *testing.T) {
	dir := serviceDir(t) // removed once the box is gone
	box := bootSystemd(t)
	nobody, err := user.Lookup("nobody")
	if err != nil {
		box.unavailable("no user nobody: " + err.Error())
	}
	uid, _ := strconv.Atoi(nobody.Uid)
	gid, _ := strconv.Atoi(nobody.Gid)
	r := newServiceRig(t, box, &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, dir)
	const cg = "/system.slice/latch.service"
	probe := "/sys/fs/cgroup/system.slice/latch-systemd-test"

	// Type=notify: enable --now returns once latch said READY=1.
	r.install("--system", "--user", "nobody")
	box.wantService(nil, "ActiveState", "active")
	if s := box.show(nil, "StatusText"); !strings.Contains(s, "not paired") {
		t.Errorf("status line %q, want latch's own (telegram: not paired)", s)
	}
	if out := box.must(nil, nil, r.bin, "service", "status", "--system"); !strings.Contains(out, "active (running)") {
		t.Errorf("latch service status --system:\n%s", out)
	}
	if out := box.must(nil, nil, r.bin, "logs", "--system"); !strings.Contains(out, "latch is running") {
		t.Errorf("latch logs --system:\n%s\nwant the daemon's log", out)
	}
	r.pair()
	// nobody may not write /etc or the cgroup tree outside latch's own
	// cgroup; the hardened unit makes them read-only.
	if reply := r.command("86401", cg, "/etc/latch-systemd-test", probe); strings.Contains(reply, "Read-only file system") {
		t.Errorf("unhardened unit: %q", reply)
	}

	// Reload: SIGHUP, RELOADING=1, READY=1; the same process goes on.
	pid := box.show(nil, "MainPID")
	box.must(nil, nil, "systemctl", "reload", "latch.service")
	if now := box.show(nil, "MainPID"); now != pid {
		t.Errorf("reload: main PID %s → %s, want the same process", pid, now)
	}

	// Stop with a command running: SIGTERM to latch alone (KillMode=mixed),
	// latch's grace, then latch ends the command and exits cleanly, before
	// TimeoutStopSec would have systemd kill it.
	r.tg.SendText(r.chat, r.owner, "!sleep 86402")
	waitFor(t, "the command's sleep", func() bool { return len(processes("sleep\x0086402\x00")) > 0 })
	box.must(nil, nil, "systemctl", "stop", "latch.service")
	box.wantService(nil, "ActiveState", "inactive")
	box.wantService(nil, "Result", "success")
	waitGone(t, "sleep\x0086402\x00")

	// Started again, latch says what the stop interrupted. A drop-in
	// shortens the watchdog to 5 s: latch must ping it (every 2.5 s, half
	// of it) through the 11 s that follow, or systemd kills and restarts
	// it; only a dispatch loop stalled for 2.5 s could miss.
	dropIn := filepath.Join(box.etc, "latch.service.d")
	if err := os.MkdirAll(dropIn, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dropIn, "watchdog.conf"), []byte("[Service]\nWatchdogSec=5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	box.must(nil, nil, "systemctl", "daemon-reload")
	box.must(nil, nil, "systemctl", "start", "latch.service")
	waitSent(t, r.tg, r.owner.ID, "interrupted by a restart")
	pid = box.show(nil, "MainPID")
	time.Sleep(11 * time.Second)
	box.wantService(nil, "ActiveState", "active")
	box.wantService(nil, "NRestarts", "0")
	box.wantService(nil, "MainPID", pid)
	if ts := box.show(nil, "WatchdogTimestampMonotonic"); ts == "" || ts == "0" {
		t.Errorf("WatchdogTimestampMonotonic=%q: latch never pinged the watchdog", ts)
	}
	if err := os.RemoveAll(dropIn); err != nil {
		t.Fatal(err)
	}

	// Hardened: the same, with /etc and the cgroup tree but for latch's own
	// cgroup read-only to the command.
	r.install("--system", "--user", "nobody", "--harden")
	box.wantService(nil, "ActiveState", "active")
	wantReadOnly(t, r.command("86403", cg, "/etc/latch-systemd-test", probe), "/etc/latch-systemd-test", probe)
}

// TestUserServiceUnderRealSystemd does the same for the unit most people
// install, a user service (`latch service install`), run by the user
// manager that logind starts for the login session (su -l, through PAM) of
// a user who exists only inside the box: install and latch doctor tell
// whether that manager outlives the login (lingering, as logind says), the
// user manager delegates latch's cgroup too, and in a user service a
// command could otherwise write anywhere in the user's own cgroup tree,
// which the hardened unit (PrivateUsers= with ProtectControlGroups=) makes
// read-only but for latch's own cgroup.
func TestUserServiceUnderRealSystemd(t *testing.T) {
	dir := serviceDir(t) // removed once the box is gone
	u := boxUser{name: "latchtest", uid: 64999, home: filepath.Join(dir, "user")}
	box := bootSystemd(t, u)
	if err := os.Mkdir(u.home, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(u.home, u.uid, u.uid); err != nil {
		t.Fatal(err)
	}
	box.must(nil, nil, "systemctl", "start", "dbus.socket", "systemd-logind.service")
	box.login(u)
	r := newServiceRig(t, box, &syscall.Credential{Uid: uint32(u.uid), Gid: uint32(u.uid)}, dir)
	r.env = append(r.env, "HOME="+u.home, fmt.Sprintf("XDG_RUNTIME_DIR=/run/user/%d", u.uid))
	r.root = false
	cg := fmt.Sprintf("/user.slice/user-%[1]d.slice/user@%[1]d.service/app.slice", u.uid)
	probe := "/sys/fs/cgroup" + cg + "/latch-systemd-test"

	// Install and latch doctor ask the real logind whether the user
	// manager outlives the login.
	hint := "loginctl enable-linger " + u.name
	if out := r.install(); !strings.Contains(out, hint) {
		t.Errorf("service install without lingering:\n%s\nwant the hint %q", out, hint)
	}
	box.wantService(r.as, "ActiveState", "active")
	if out := box.must(r.as, r.env, r.bin, "doctor"); !strings.Contains(out, hint) {
		t.Errorf("latch doctor without lingering:\n%s\nwant the hint %q", out, hint)
	}
	box.must(nil, nil, "loginctl", "enable-linger", u.name)
	if out := box.must(r.as, r.env, r.bin, "doctor"); strings.Contains(out, hint) || !strings.Contains(out, "lingering") {
		t.Errorf("latch doctor with lingering:\n%s", out)
	}
	r.pair()
	// Without hardening the user may make cgroups beside latch's: the gap
	// the hardened unit closes.
	if reply := r.command("86404", cg+"/latch.service", probe); strings.Contains(reply, "Read-only file system") {
		t.Errorf("unhardened user unit: %q", reply)
	}
	box.must(nil, nil, "rmdir", probe)

	r.install("--harden")
	box.wantService(r.as, "ActiveState", "active")
	if out := box.must(r.as, r.env, r.bin, "doctor"); strings.Contains(out, "older latch") {
		t.Errorf("latch doctor calls the unit this latch wrote stale:\n%s", out)
	}
	wantReadOnly(t, r.command("86405", cg+"/latch.service", probe), probe)
	r.mintThroughSystemdRun()
}

// mintThroughSystemdRun: the chat hands `latch pair --replace` to the real
// user manager with systemd-run --user, outside latch's tree and cgroup,
// where the descendant check cannot see it: the mint goes through. The
// stranger who redeems the code only waits; the owner's chat gets the
// approval request, naming the caller's ancestry (systemd); the latch
// stays the owner's until the owner presses.
func (r *serviceRig) mintThroughSystemdRun() {
	r.t.Helper()
	home := strings.TrimPrefix(r.env[0], "LATCH_HOME=")
	r.tg.SendText(r.chat, r.owner, "!systemd-run --user --quiet --wait --pipe -E LATCH_HOME="+home+" "+r.bin+" pair telegram --replace --json; echo done-run")
	reply := waitSent(r.t, r.tg, r.owner.ID, "done-run", "[exit ")
	var minted struct{ Code string }
	start := strings.Index(reply, "{")
	end := strings.Index(reply, "}")
	if start < 0 || end < start || json.Unmarshal([]byte(reply[start:end+1]), &minted) != nil || minted.Code == "" {
		r.t.Fatalf("systemd-run --user latch pair --replace printed %q, want a code", reply)
	}
	stranger := telegramtest.User{ID: 6666, FirstName: "Mallory"}
	r.tg.SendText(telegramtest.Private(stranger), stranger, "/pair "+minted.Code)
	waitSent(r.t, r.tg, stranger.ID, "waiting for the owner's approval")
	req := waitSent(r.t, r.tg, r.owner.ID, "Approve a new latch?", "Mallory")
	if !strings.Contains(req, "systemd") {
		r.t.Errorf("the approval request does not say the mint came through systemd:\n%s", req)
	}
	if out := r.box.must(r.as, r.env, r.bin, "status"); !strings.Contains(out, "4242") {
		r.t.Errorf("latch status after the stranger's redemption:\n%s\nwant the owner's chat still latched", out)
	}
}

// serviceRig is latch set up for a service in a box: a copy of this test
// binary as latch, a home owned by the user it runs as, and the fake Bot
// API it talks to.
type serviceRig struct {
	t     *testing.T
	box   *systemdBox
	bin   string
	as    *syscall.Credential // the user latch runs as
	env   []string            // for every latch command
	root  bool                // the service is the system manager's
	tg    *telegramtest.Server
	owner telegramtest.User
	chat  telegramtest.Chat
}

// serviceDir makes a directory for latch's binary and homes, not below
// /tmp: the hardened unit's PrivateTmp= would hide it.
func serviceDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/var/lib", "latch-systemd-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// newServiceRig sets latch up in dir, a serviceDir, with LATCH_HOME in
// it, runs latch init as the user and configures Telegram.
func newServiceRig(t *testing.T, box *systemdBox, as *syscall.Credential, dir string) *serviceRig {
	t.Helper()
	r := &serviceRig{t: t, box: box, as: as, root: true, bin: filepath.Join(dir, "latch"),
		owner: telegramtest.User{ID: 4242, FirstName: "Owner"}}
	r.chat = telegramtest.Private(r.owner)
	copyExecutable(t, r.bin)
	home := filepath.Join(dir, "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(home, int(as.Uid), int(as.Gid)); err != nil {
		t.Fatal(err)
	}
	r.tg = telegramtest.New(testToken)
	t.Cleanup(r.tg.Close)
	r.env = []string{"LATCH_HOME=" + home, "PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	box.must(as, r.env, r.bin, "init")
	cfg := fmt.Sprintf("[telegram]\ntoken = %q\napi_url = %q\n", testToken, r.tg.URL())
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(filepath.Join(home, "config.toml"), int(as.Uid), int(as.Gid)); err != nil {
		t.Fatal(err)
	}
	return r
}

// install runs latch service install, as root for a system unit, as the
// user for theirs, and returns what it printed. latch status must then
// say commands get cgroups.
func (r *serviceRig) install(args ...string) string {
	r.t.Helper()
	var as *syscall.Credential
	if !r.root {
		as = r.as
	}
	printed := r.box.must(as, r.env, append([]string{r.bin, "service", "install"}, args...)...)
	if out := r.box.must(r.as, r.env, r.bin, "status"); !strings.Contains(out, "a cgroup per command") {
		r.t.Fatalf("latch status after service install %s:\n%s\nwant commands in cgroups of their own", strings.Join(args, " "), out)
	}
	return printed
}

// pair mints a code with latch pair and sends it from the owner's chat.
func (r *serviceRig) pair() {
	r.t.Helper()
	var pair struct{ Code string }
	if err := json.Unmarshal([]byte(r.box.must(r.as, r.env, r.bin, "pair", "telegram", "--json")), &pair); err != nil || pair.Code == "" {
		r.t.Fatalf("pair --json: %v", err)
	}
	r.tg.SendText(r.chat, r.owner, "/pair "+pair.Code)
	waitSent(r.t, r.tg, r.owner.ID, "Paired")
}

// command runs a chat command that starts a process outside its session
// (killed with the command all the same), tells its cgroup (which must be
// a cgroup of its own below the service's, serviceCgroup) and tries to
// make each of files; it returns the reply.
func (r *serviceRig) command(marker, serviceCgroup string, files ...string) string {
	r.t.Helper()
	cmd := "!(setsid sleep " + marker + " </dev/null >/dev/null 2>&1 &); grep '^0::' /proc/self/cgroup"
	for _, f := range files {
		if strings.HasPrefix(f, "/sys/") {
			cmd += "; mkdir " + f
		} else {
			cmd += "; touch " + f
		}
	}
	r.tg.SendText(r.chat, r.owner, cmd+"; echo done-"+marker)
	reply := waitSent(r.t, r.tg, r.owner.ID, "done-"+marker, "[exit ")
	if !strings.Contains(reply, "0::"+serviceCgroup+"/latch-") || !strings.Contains(reply, "/cmd-") {
		r.t.Errorf("the command ran in %q, want a cgroup of its own below %s", reply, serviceCgroup)
	}
	waitGone(r.t, "sleep\x00"+marker+"\x00")
	return reply
}

// wantReadOnly fails unless reply says each of paths is on a read-only
// file system (touch quotes it with ', mkdir with ’).
func wantReadOnly(t *testing.T, reply string, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if !strings.Contains(reply, p+"': Read-only file system") && !strings.Contains(reply, p+"’: Read-only file system") {
			t.Errorf("hardened unit: %q, want %s on a read-only file system", reply, p)
		}
	}
}

// testToken is the bot token the fake accepts; it is not a secret.
const testToken = "7012345678:AAF-systemdTESTnotAsecret_x"

// copyExecutable copies this test binary to path, mode 0755.
func copyExecutable(t *testing.T, path string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o755); err != nil {
		t.Fatal(err)
	}
}

// waitSent waits for the bot's message to chatID that contains each of
// want and returns what the user sees of it.
func waitSent(t *testing.T, tg *telegramtest.Server, chatID int64, want ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := tg.WaitSent(ctx, func(m telegramtest.Sent) bool {
		if m.ChatID != chatID {
			return false
		}
		for _, w := range want {
			if !strings.Contains(m.Plain, w) {
				return false
			}
		}
		return true
	})
	if err != nil {
		var got []string
		for _, m := range tg.SentTo(chatID) {
			got = append(got, m.Plain)
		}
		t.Fatalf("no message with %q: %v; sent: %q", want, err, got)
	}
	return m.Plain
}

// processes lists the PIDs whose command line holds cmdline.
func processes(cmdline string) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil && strings.Contains(string(b), cmdline) {
			out = append(out, pid)
		}
	}
	return out
}

// waitGone fails the test when a process with cmdline is still there after
// a few seconds, and kills it.
func waitGone(t *testing.T, cmdline string) {
	t.Helper()
	for end := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) { // a loaded machine reaps slowly
		left := processes(cmdline)
		if len(left) == 0 {
			return
		}
		if time.Now().After(end) {
			for _, pid := range left {
				syscall.Kill(pid, syscall.SIGKILL)
			}
			t.Errorf("process %q outlived its command: %v", strings.ReplaceAll(cmdline, "\x00", " "), left)
			return
		}
	}
}

// systemdBox is a systemd running as PID 1 of namespaces of its own, in a
// cgroup made for it below the test's.
type systemdBox struct {
	t   *testing.T
	pid int    // systemd's, as this process sees it
	etc string // the box's /etc/systemd/system
	log *watched
}

// bootBox is the shell that becomes systemd: a mount namespace whose /run,
// /var/log and /etc/systemd/system (and, for users of the test's own,
// /etc/passwd, /etc/group, /etc/shadow and logind's lingering list) are
// its own, the cgroup namespace's root mounted as the unified hierarchy,
// and every unit the boot would pull in from the distribution masked, with
// its generators: booting must not clean /tmp, apply sysctls or mount what
// fstab says on the machine running the tests.
const bootBox = `set -e
mount --make-rprivate /
mount -t cgroup2 cgroup2 /sys/fs/cgroup
mount -t tmpfs -o mode=0755 tmpfs /run
mount -t tmpfs -o mode=0755 tmpfs /var/log
mount --bind "$BOX_ETC" /etc/systemd/system
if [ -n "$BOX_ACCOUNTS" ]; then
	for f in passwd group shadow; do
		mount --bind "$BOX_ACCOUNTS/$f" /etc/$f
	done
	mkdir -p /var/lib/systemd/linger
	mount -t tmpfs -o mode=0755 tmpfs /var/lib/systemd/linger
fi
mkdir -p /run/systemd/system /run/systemd/system-generators
for w in /lib/systemd/system/*.wants/* /usr/lib/systemd/system/*.wants/*; do
	[ -e "$w" ] || [ -L "$w" ] || continue
	u=${w##*/}
	case $u in systemd-journald*) continue ;; esac
	for k in $BOX_KEEP; do
		[ "$u" = "$k" ] && continue 2
	done
	ln -sf /dev/null "/run/systemd/system/$u"
done
for g in /lib/systemd/system-generators/* /usr/lib/systemd/system-generators/*; do
	[ -e "$g" ] && ln -sf /dev/null "/run/systemd/system-generators/${g##*/}"
done
printf '[Unit]\nDescription=latch test\nDefaultDependencies=no\n' >/run/systemd/system/latch-test.target
exec env -i container=latch-test PATH=/usr/sbin:/usr/bin:/sbin:/bin "$BOX_SYSTEMD" --system --unit=latch-test.target --log-target=console
`

// boxUser is an account that exists only inside the box, with the units
// a user manager needs left unmasked.
type boxUser struct {
	name string
	uid  int
	home string
}

// bootSystemd boots a systemd for the test and stops it at the end; with
// users, they exist inside it and it runs D-Bus and logind, so that it can
// start their user managers. It skips without root, systemd or cgroup v2,
// unless LATCH_REQUIRE_ROOT_TESTS is set (CI runs as root with systemd
// installed).
func bootSystemd(t *testing.T, users ...boxUser) *systemdBox {
	t.Helper()
	b := &systemdBox{t: t, log: &watched{}}
	if os.Geteuid() != 0 {
		b.unavailable("not root")
	}
	systemd := ""
	for _, p := range []string{"/lib/systemd/systemd", "/usr/lib/systemd/systemd"} {
		if _, err := os.Stat(p); err == nil {
			systemd = p
			break
		}
	}
	if systemd == "" {
		b.unavailable("systemd is not installed")
	}
	for _, tool := range []string{"unshare", "nsenter", "systemctl"} {
		if _, err := exec.LookPath(tool); err != nil {
			b.unavailable(tool + " is not installed")
		}
	}
	cg, err := testCgroup()
	if err != nil {
		b.unavailable("no cgroup v2 for the box: " + err.Error())
	}
	t.Cleanup(func() { removeCgroup(t, cg) })
	cgfd, err := syscall.Open(cg, syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(cgfd)
	b.etc = t.TempDir()

	cmd := exec.Command("unshare", "--pid", "--fork", "--kill-child", "--mount", "--cgroup", "--uts", "--mount-proc", "sh", "-c", bootBox)
	cmd.Env = []string{"BOX_ETC=" + b.etc, "BOX_SYSTEMD=" + systemd, "PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	if len(users) > 0 {
		cmd.Env = append(cmd.Env, "BOX_ACCOUNTS="+boxAccounts(t, users),
			"BOX_KEEP=dbus.socket dbus.service systemd-logind.service systemd-user-sessions.service")
	}
	cmd.Stdout, cmd.Stderr = b.log, b.log
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: cgfd}
	if err := cmd.Start(); err != nil {
		b.unavailable("unshare: " + err.Error())
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("journal of the box:\n%s", b.run(nil, nil, "journalctl", "--no-pager", "-n", "60", "_TRANSPORT=stdout", "+", "_TRANSPORT=journal", "+", "_TRANSPORT=syslog"))
			t.Logf("systemd's console:\n%s", b.log.String())
		}
		// Stopped by systemd, the services' private /tmp and /var/tmp
		// go too. Killing the cgroup then ends systemd, and with it its
		// PID namespace.
		b.run(nil, nil, "systemctl", "stop", "latch.service", "user.slice", "systemd-logind.service", "dbus.service")
		os.WriteFile(filepath.Join(cg, "cgroup.kill"), []byte("1"), 0)
		cmd.Wait()
	})
	for end := time.Now().Add(10 * time.Second); b.pid == 0; time.Sleep(10 * time.Millisecond) {
		kids, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", cmd.Process.Pid, cmd.Process.Pid))
		b.pid, _ = strconv.Atoi(strings.TrimSpace(string(kids)))
		if time.Now().After(end) {
			t.Fatalf("unshare started no child:\n%s", b.log.String())
		}
	}
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		state := strings.TrimSpace(b.run(nil, nil, "systemctl", "is-system-running"))
		if state == "running" || state == "degraded" {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("systemd did not come up (%q):\n%s", state, b.log.String())
		}
	}
	return b
}

// login keeps a login session of u open (su -l through PAM, which
// registers it with logind) until the box ends, as a user who installs
// latch has one; logind starts u's user manager for it.
func (b *systemdBox) login(u boxUser) {
	b.t.Helper()
	cmd := exec.Command("nsenter", "-t", strconv.Itoa(b.pid), "-a", "--", "su", "-l", u.name, "-c", "exec sleep 86500")
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	if err := cmd.Start(); err != nil {
		b.t.Fatal(err)
	}
	b.t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	manager := fmt.Sprintf("user@%d.service", u.uid)
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if strings.TrimSpace(b.run(nil, nil, "systemctl", "is-active", manager)) == "active" {
			return
		}
		if time.Now().After(end) {
			b.t.Fatalf("no user manager for %s after su -l:\n%s", u.name, b.log.String())
		}
	}
}

// boxAccounts writes copies of /etc/passwd, /etc/group and /etc/shadow
// (which PAM's account check reads) with users added, for the box to mount
// over the machine's; it returns the directory holding them.
func boxAccounts(t *testing.T, users []boxUser) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []struct{ name, line string }{
		{"passwd", "%[1]s:x:%[2]d:%[2]d:latch test:%[3]s:/bin/sh\n"},
		{"group", "%[1]s:x:%[2]d:\n"},
		{"shadow", "%[1]s:*:19000:0:99999:7:::\n"},
	} {
		path := "/etc/" + f.name
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range users {
			b = fmt.Appendf(b, f.line, u.name, u.uid, u.home)
		}
		copy := filepath.Join(dir, f.name)
		if err := os.WriteFile(copy, b, fi.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if err := os.Chown(copy, int(st.Uid), int(st.Gid)); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(copy, fi.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func (b *systemdBox) unavailable(why string) {
	b.t.Helper()
	if os.Getenv("LATCH_REQUIRE_ROOT_TESTS") != "" {
		b.t.Fatal("no systemd for the test: " + why + "; LATCH_REQUIRE_ROOT_TESTS is set")
	}
	b.t.Skip("no systemd for the test: " + why)
}

// run runs args in the box's namespaces, as cred (nil: root), with env
// (nil: just PATH), and returns its output, errors included.
func (b *systemdBox) run(cred *syscall.Credential, env []string, args ...string) string {
	out, _ := b.exec(cred, env, args...)
	return out
}

// must is run, failing the test when the command fails.
func (b *systemdBox) must(cred *syscall.Credential, env []string, args ...string) string {
	b.t.Helper()
	out, err := b.exec(cred, env, args...)
	if err != nil {
		b.t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func (b *systemdBox) exec(cred *syscall.Credential, env []string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	enter := []string{"-t", strconv.Itoa(b.pid), "-a"}
	if cred != nil {
		// nsenter needs root to enter; the command then runs as cred.
		enter = append(enter, "-S", strconv.Itoa(int(cred.Uid)), "-G", strconv.Itoa(int(cred.Gid)))
	}
	cmd := exec.CommandContext(ctx, "nsenter", append(append(enter, "--"), args...)...)
	cmd.Env = env
	if env == nil {
		cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// What the command leaves running in the box (a login's processes,
	// say) may hold the output pipe open.
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	return out.String(), err
}

// systemctl runs systemctl with args in the box: the system manager's
// when as is nil, else the user manager of as, with the environment
// systemctl --user needs.
func (b *systemdBox) systemctl(as *syscall.Credential, args ...string) (string, error) {
	if as == nil {
		return b.exec(nil, nil, append([]string{"systemctl"}, args...)...)
	}
	env := []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", fmt.Sprintf("XDG_RUNTIME_DIR=/run/user/%d", as.Uid)}
	return b.exec(as, env, append([]string{"systemctl", "--user"}, args...)...)
}

// show is a property of latch.service in the manager as stands for.
func (b *systemdBox) show(as *syscall.Credential, prop string) string {
	b.t.Helper()
	out, err := b.systemctl(as, "show", "-P", prop, "latch.service")
	if err != nil {
		b.t.Fatalf("systemctl show -P %s latch.service: %v\n%s", prop, err, out)
	}
	return strings.TrimSpace(out)
}

func (b *systemdBox) wantService(as *syscall.Credential, prop, want string) {
	b.t.Helper()
	if got := b.show(as, prop); got != want {
		status, _ := b.systemctl(as, "status", "--no-pager", "-n", "30", "latch.service")
		b.t.Fatalf("latch.service %s=%s, want %s\n%s", prop, got, want, status)
	}
}

// testCgroup makes a cgroup below the test's own in the unified hierarchy.
func testCgroup() (string, error) {
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	own := ""
	for line := range strings.SplitSeq(string(self), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			own = p
		}
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	for line := range strings.SplitSeq(string(mounts), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		f := strings.Fields(pre)
		if !ok || len(f) < 5 || !strings.HasPrefix(post, "cgroup2 ") {
			continue
		}
		rel, err := filepath.Rel(f[3], own)
		if err != nil || strings.HasPrefix(rel, "..") {
			continue
		}
		dir := filepath.Join(f[4], rel, fmt.Sprintf("latch-systemd-test-%d", os.Getpid()))
		if err := os.Mkdir(dir, 0o755); err != nil {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, "cgroup.kill")); err != nil {
			os.Remove(dir)
			continue
		}
		return dir, nil
	}
	return "", fmt.Errorf("no writable cgroup2 mount holds %s", own)
}

// removeCgroup kills what is left in cg and removes its tree.
func removeCgroup(t *testing.T, cg string) {
	os.WriteFile(filepath.Join(cg, "cgroup.kill"), []byte("1"), 0)
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var dirs []string
		filepath.WalkDir(cg, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			os.Remove(dirs[i])
		}
		if _, err := os.Stat(cg); os.IsNotExist(err) {
			return
		}
		if time.Now().After(end) {
			t.Errorf("cgroup %s not removed", cg)
			return
		}
	}
}

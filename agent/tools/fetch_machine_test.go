package tools

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
)

// testGuard is an addrGuard whose machine holds exactly the prefixes in
// local, so that a table's verdicts do not depend on the addresses of the
// machine running the test.
func testGuard(allow []netip.Prefix, local ...string) addrGuard {
	g := newAddrGuard(allow)
	ps := make([]netip.Prefix, 0, len(local))
	for _, p := range local {
		ps = append(ps, netip.MustParsePrefix(p))
	}
	g.local = func() ([]netip.Prefix, error) { return ps, nil }
	return g
}

func TestAddrGuardMachineAddresses(t *testing.T) {
	t.Parallel()
	// A VPS: a public IPv4 and IPv6 on eth0, a LAN address, a link-local
	// one, and 10.9.0.0/24 on a loopback interface (all of it local).
	local := []string{
		"93.184.216.34/32", "2606:4700::1/128", "192.168.1.5/32", "fe80::1/128",
		"10.9.0.0/24", "127.0.0.0/8", "::1/128", "169.254.170.2/32",
	}
	const own = "is an address of this machine"
	tests := []struct {
		allow []string
		addr  string
		want  string // "" = open; otherwise a substring of the refusal
	}{
		{nil, "93.184.216.34", `93.184.216.34 is an address of this machine (allow it with [agent.fetch] allow = ["93.184.216.34/32"])`},
		{nil, "93.184.216.35", ""},
		{nil, "::ffff:93.184.216.34", own},
		{nil, "64:ff9b::5db8:d822", "leads to 93.184.216.34, an address of this machine"},
		{nil, "2606:4700::1", `2606:4700::1 is an address of this machine (allow it with [agent.fetch] allow = ["2606:4700::1/128"])`},
		{nil, "2606:4700::2", ""},
		{nil, "8.8.8.8", ""},
		// A range opened for the LAN, or everything, does not open the
		// machine; an entry naming its address does.
		{[]string{"192.168.0.0/16"}, "192.168.1.5", own},
		{[]string{"192.168.0.0/16"}, "192.168.1.6", ""},
		{[]string{"192.168.1.5/32"}, "192.168.1.5", ""},
		{[]string{"0.0.0.0/0"}, "93.184.216.34", own},
		{[]string{"93.184.216.0/24"}, "93.184.216.34", own},
		{[]string{"93.184.216.34/32"}, "93.184.216.34", ""},
		{[]string{"93.184.216.34/32"}, "::ffff:93.184.216.34", ""},
		{[]string{"::/0"}, "2606:4700::1", own},
		{[]string{"2606:4700::1/128"}, "2606:4700::1", ""},
		{[]string{"fe80::/10"}, "fe80::1%eth0", own},
		{[]string{"10.0.0.0/8"}, "10.9.0.77", own},
		{[]string{"10.0.0.0/8"}, "10.9.1.1", ""},
		// Closed by its range and not opened: that refusal, whose hint
		// opens both.
		{nil, "192.168.1.5", `192.168.1.5 is a private address (allow it with [agent.fetch] allow = ["192.168.1.5/32"])`},
		{nil, "169.254.170.2", "credentials endpoint"},
		// Loopback keeps its rules: opening it opens the machine on purpose.
		{nil, "127.0.0.1", "127.0.0.1 is a loopback address"},
		{[]string{"127.0.0.0/8"}, "127.0.0.1", ""},
		{[]string{"127.0.0.0/8"}, "::ffff:127.0.0.1", ""},
		{[]string{"::1/128"}, "::1", ""},
	}
	for _, tt := range tests {
		var allow []netip.Prefix
		for _, p := range tt.allow {
			allow = append(allow, netip.MustParsePrefix(p))
		}
		err := testGuard(allow, local...).check(netip.MustParseAddr(tt.addr))
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("allow %v, check(%s) = %v; want open", tt.allow, tt.addr, err)
		case tt.want != "" && err == nil:
			t.Errorf("allow %v, check(%s) = open; want a refusal saying %q", tt.allow, tt.addr, tt.want)
		case tt.want != "" && (!errors.Is(err, ErrFetchRefused) || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("allow %v, check(%s) = %v; want a refusal saying %q", tt.allow, tt.addr, err, tt.want)
		}
	}
}

func TestAddrGuardFailsClosedWithoutMachineAddrs(t *testing.T) {
	t.Parallel()
	g := newAddrGuard(nil)
	g.local = func() ([]netip.Prefix, error) { return nil, errors.New("netlink: too many open files") }
	err := g.checkSocket("tcp4", "8.8.8.8:443", nil)
	if !errors.Is(err, ErrFetchRefused) || !strings.Contains(err.Error(), "cannot read this machine's addresses") {
		t.Errorf("checkSocket with the addresses unreadable = %v, want a refusal", err)
	}
}

// TestAddrGuardMachineAddrs checks machineAddrs against the machine the
// test runs on: every interface address is in, a loopback interface counts
// with its whole prefix, another interface's neighbours stay out.
func TestAddrGuardMachineAddrs(t *testing.T) {
	t.Parallel()
	got, err := machineAddrs()
	if err != nil {
		t.Fatal(err)
	}
	local := func(a netip.Addr) bool { return inPrefixes(got, a) }
	ifaces, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	var all []netip.Addr
	type ifaceAddr struct {
		prefix   netip.Prefix
		loopback bool
	}
	var addrs []ifaceAddr
	for _, ifi := range ifaces {
		as, err := ifi.Addrs()
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range as {
			ipn, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			addr, _ := netip.AddrFromSlice(ipn.IP)
			ones, _ := ipn.Mask.Size()
			p := netip.PrefixFrom(addr.Unmap(), ones)
			all = append(all, p.Addr())
			addrs = append(addrs, ifaceAddr{p, ifi.Flags&net.FlagLoopback != 0})
		}
	}
	for _, ia := range addrs {
		a, next := ia.prefix.Addr(), ia.prefix.Addr().Next()
		if !local(a) {
			t.Errorf("machineAddrs() = %v, lacks %s", got, a)
		}
		if !ia.prefix.Contains(next) {
			continue
		}
		switch {
		case ia.loopback && !local(next):
			t.Errorf("machineAddrs() = %v, lacks %s from the loopback prefix %s", got, next, ia.prefix)
		case !ia.loopback && local(next) && !containsAddr(all, next):
			t.Errorf("machineAddrs() = %v, has %s, another machine on the link of %s", got, next, ia.prefix)
		}
	}
}

func containsAddr(addrs []netip.Addr, a netip.Addr) bool {
	for _, b := range addrs {
		if b == a {
			return true
		}
	}
	return false
}

// addrConn is a connection that only has addresses.
type addrConn struct {
	net.Conn
	local, remote net.Addr
}

func (c addrConn) LocalAddr() net.Addr  { return c.local }
func (c addrConn) RemoteAddr() net.Addr { return c.remote }

func TestAddrGuardCheckConn(t *testing.T) {
	t.Parallel()
	tcp := func(s string) net.Addr { return net.TCPAddrFromAddrPort(netip.MustParseAddrPort(s)) }
	tests := []struct {
		allow         []netip.Prefix
		local, remote net.Addr
		want          string // "" = open
	}{
		{nil, tcp("10.0.0.2:40000"), tcp("93.184.216.34:80"), ""},
		{nil, tcp("[2001:db8::2]:40000"), tcp("[2606:4700::1]:80"), ""},
		{nil, tcp("93.184.216.34:40000"), tcp("93.184.216.34:80"), "93.184.216.34 is an address of this machine"},
		{nil, tcp("[::ffff:93.184.216.34]:40000"), tcp("93.184.216.34:80"), "93.184.216.34 is an address of this machine"},
		{nil, tcp("[2606:4700::1]:40000"), tcp("[2606:4700::1]:80"), "2606:4700::1 is an address of this machine"},
		{nil, tcp("[fe80::1%eth0]:40000"), tcp("[fe80::1%eth0]:80"), "is a link-local address"},
		{allow("0.0.0.0/0"), tcp("93.184.216.34:40000"), tcp("93.184.216.34:80"), "is an address of this machine"},
		{allow("93.184.216.34/32"), tcp("93.184.216.34:40000"), tcp("93.184.216.34:80"), ""},
		{nil, tcp("127.0.0.1:40000"), tcp("127.0.0.1:80"), "127.0.0.1 is a loopback address"},
		{allow("127.0.0.0/8"), tcp("127.0.0.1:40000"), tcp("127.0.0.1:80"), ""},
		{nil, &net.UnixAddr{Name: "@x", Net: "unix"}, tcp("93.184.216.34:80"), "cannot check the addresses"},
	}
	for _, tt := range tests {
		// No address is the machine's by its list: checkConn decides by
		// the connection alone.
		err := testGuard(tt.allow).checkConn(addrConn{local: tt.local, remote: tt.remote})
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("allow %v, %s → %s: %v; want open", tt.allow, tt.local, tt.remote, err)
		case tt.want != "" && (!errors.Is(err, ErrFetchRefused) || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("allow %v, %s → %s: %v; want a refusal saying %q", tt.allow, tt.local, tt.remote, err, tt.want)
		}
	}
}

// TestFetchConnCheckRefusesTheMachine makes a real connection whose two
// ends share an address, past a Control hook switched off, to show the
// check after connect stops it on its own. Loopback is the one such
// connection every machine can make.
func TestFetchConnCheckRefusesTheMachine(t *testing.T) {
	t.Parallel()
	for _, connCheck := range []bool{true, false} {
		t.Run(fmt.Sprintf("connCheck=%v", connCheck), func(t *testing.T) {
			t.Parallel()
			var hits atomic.Int32
			srv := newLoopbackServer(t, "127.0.0.1", countingHandler(&hits))
			f := newTestFetcher(t, FetchOptions{}, nil)
			f.test.noUpfrontCheck = true
			f.test.noSocketCheck = true
			f.test.noConnCheck = !connCheck
			out, err := f.Fetch(t.Context(), FetchArgs{URL: "http://127.0.0.1:" + srv.port + "/"})
			if !connCheck {
				if err != nil || hits.Load() != 1 {
					t.Fatalf("without the check after connect: %q, %v, %d requests; want the server reached", out, err, hits.Load())
				}
				return
			}
			if !errors.Is(err, ErrFetchRefused) || !strings.HasPrefix(err.Error(), "fetch refused: 127.0.0.1 is a loopback address") {
				t.Fatalf("Fetch = %q, %v; want a refusal naming 127.0.0.1", out, err)
			}
			if n := hits.Load(); n != 0 {
				t.Errorf("the server answered %d requests, want 0", n)
			}
		})
	}
}

func countingHandler(hits *atomic.Int32) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Write([]byte("a service on this machine"))
	})
}

// Public addresses the test puts on lo of a network namespace of its own,
// as a VPS has them on eth0, plus a range routed to lo without being
// assigned (AnyIP). The namespace has no other interface: nothing can
// leave it.
const (
	netnsV4        = "93.184.216.34"
	netnsV6        = "2606:4700::1"
	netnsAnyIP     = "93.184.217.0/24"
	netnsAnyIPAddr = "93.184.217.5"
	netnsChild     = "LATCH_FETCH_NETNS_CHILD"
)

var netnsSetup = fmt.Sprintf(`set -e
ip link set lo up
ip addr add %s/32 dev lo
ip route add local %s dev lo
ip -6 addr add %s/128 dev lo || echo "no IPv6 in the namespace"
exec "$@"`, netnsV4, netnsAnyIP, netnsV6)

// TestFetchRefusesMachineAddress connects for real to services on this
// machine through addresses other than loopback: first this machine's own
// (typically private ones, opened by a range the way an owner opens their
// LAN), then, in a network namespace, public ones with nothing opened, and
// an AnyIP range, which only the check after connect catches.
func TestFetchRefusesMachineAddress(t *testing.T) {
	if os.Getenv(netnsChild) != "" {
		fetchMachineInNetns(t)
		return
	}
	t.Parallel()
	tested := 0
	t.Run("interfaces", func(t *testing.T) { tested = fetchMachineInterfaces(t) })
	t.Run("netns", func(t *testing.T) { runInNetns(t, tested) })
}

// fetchMachineInterfaces fetches from a server on one IPv4 and one IPv6
// address of this machine's interfaces, if it has such, and returns how
// many it tested.
func fetchMachineInterfaces(t *testing.T) int {
	ifaces, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	var picked []netip.Addr
	for _, ifi := range ifaces {
		if ifi.Flags&net.FlagUp == 0 || ifi.Flags&net.FlagLoopback != 0 {
			continue
		}
		as, err := ifi.Addrs()
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range as {
			ipn, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			addr, _ := netip.AddrFromSlice(ipn.IP)
			addr = addr.Unmap()
			c, closed := classify(addr)
			// A link-local address needs a zone; a credential service's
			// needs an exact Allow entry, which would open it as ours too.
			if !addr.IsGlobalUnicast() || closed && c.exact || hasFamily(picked, addr) {
				continue
			}
			picked = append(picked, addr)
		}
	}
	n := 0
	for _, a := range picked {
		t.Run(a.String(), func(t *testing.T) {
			l, err := net.Listen("tcp", net.JoinHostPort(a.String(), "0"))
			if err != nil {
				t.Logf("cannot listen on %s, not tested: %v", a, err)
				return
			}
			l.Close()
			n++
			var hits atomic.Int32
			srv := newLoopbackServer(t, a.String(), countingHandler(&hits))
			// Opened the way an owner opens their LAN; a public address
			// needs nothing.
			opened := allow(netip.PrefixFrom(a, a.BitLen()/4).Masked().String())
			refuseMachine(t, srv, &hits, func() *Fetcher {
				f := newTestFetcher(t, FetchOptions{Allow: opened}, nil)
				// The connection would stay on this machine.
				f.test.afterGuard = nil
				return f
			}, a, true)
		})
	}
	if n == 0 {
		t.Log("this machine has no address but loopback and link-local ones to test with; the netns subtest makes some")
	}
	return n
}

func hasFamily(addrs []netip.Addr, a netip.Addr) bool {
	for _, b := range addrs {
		if b.Is4() == a.Is4() {
			return true
		}
	}
	return false
}

// runInNetns runs the test binary again in a network namespace set up by
// netnsSetup, where fetchMachineInNetns does the fetches.
func runInNetns(t *testing.T, testedElsewhere int) {
	var flags []string
	var probeErr error
	var probeOut []byte
	for _, f := range [][]string{{"-rn"}, {"-n"}} {
		cmd := exec.CommandContext(t.Context(), "unshare", append(f, "ip", "link", "set", "lo", "up")...)
		if probeOut, probeErr = cmd.CombinedOutput(); probeErr == nil {
			flags = f
			break
		}
	}
	if flags == nil {
		why := probeErr.Error()
		if out := bytes.TrimSpace(probeOut); len(out) > 0 {
			why += ": " + string(out)
		}
		msg := "cannot make a network namespace with iproute2 in it (unshare -rn / -n ip link set lo up: " + why + ")"
		switch {
		case os.Getenv("LATCH_REQUIRE_ROOT_TESTS") != "":
			t.Fatal(msg + "; LATCH_REQUIRE_ROOT_TESTS is set")
		case testedElsewhere > 0:
			t.Log(msg + "; the interfaces subtest connected to this machine's own addresses instead")
			return
		}
		t.Skip(msg + ", and this machine has no address but loopback and link-local ones to test with instead")
	}
	args := slices.Concat(flags, []string{"sh", "-c", netnsSetup, "sh",
		os.Args[0], "-test.run=^TestFetchRefusesMachineAddress$", "-test.v", "-test.count=1"})
	cmd := exec.CommandContext(t.Context(), "unshare", args...)
	cmd.Env = append(os.Environ(), netnsChild+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("--- PASS: TestFetchRefusesMachineAddress")) {
		t.Fatalf("in the namespace (unshare %s): %v\n%s", strings.Join(flags, " "), err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "not tested") || strings.Contains(line, "no IPv6") {
			t.Log("in the namespace: " + strings.TrimSpace(line))
		}
	}
}

// fetchMachineInNetns runs inside the namespace netnsSetup made.
func fetchMachineInNetns(t *testing.T) {
	ifaces, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	if len(ifaces) != 1 || ifaces[0].Flags&net.FlagLoopback == 0 {
		t.Fatalf("%s is set but the interfaces are %v, not lo alone: not in the test's namespace", netnsChild, ifaces)
	}
	local, err := machineAddrs()
	if err != nil {
		t.Fatal(err)
	}
	has := func(a netip.Addr) bool { return inPrefixes(local, a) }
	v4, v6 := netip.MustParseAddr(netnsV4), netip.MustParseAddr(netnsV6)
	anyIP := netip.MustParseAddr(netnsAnyIPAddr)
	if !has(v4) || has(anyIP) {
		t.Fatalf("machineAddrs() = %v, want %s in and %s out: the namespace is not set up", local, v4, anyIP)
	}
	var hits atomic.Int32
	srv := newLoopbackServer(t, "", countingHandler(&hits)) // every address, as a dev server often listens
	newFetcher := func() *Fetcher {
		f := newTestFetcher(t, FetchOptions{}, nil)
		f.test.afterGuard = nil // lo is the only interface
		return f
	}
	t.Run("own IPv4", func(t *testing.T) { refuseMachine(t, srv, &hits, newFetcher, v4, true) })
	t.Run("own IPv6", func(t *testing.T) {
		if !has(v6) {
			t.Logf("%s is not on lo, not tested (no IPv6 in the namespace)", v6)
			return
		}
		refuseMachine(t, srv, &hits, newFetcher, v6, true)
	})
	// Not an interface address, so only the check after connect sees it.
	t.Run("AnyIP", func(t *testing.T) { refuseMachine(t, srv, &hits, newFetcher, anyIP, false) })
}

// refuseMachine fetches from srv on this machine through a, with both
// checks and with the socket checks alone, and requires a refusal naming a
// as this machine's, with no request served. beforeConnect also requires
// that no connection was made: the Control hook, not the check after
// connect, refused.
func refuseMachine(t *testing.T, srv *loopbackServer, hits *atomic.Int32, newFetcher func() *Fetcher, a netip.Addr, beforeConnect bool) {
	t.Helper()
	url := "http://" + net.JoinHostPort(a.String(), srv.port) + "/"
	// Everything off: the request must reach srv, or the test shows
	// nothing. Called after each refusal too, as a marker: the server
	// counts connections in the order it accepts them, so once this one
	// is served every earlier one is counted.
	reach := func() {
		t.Helper()
		f := newFetcher()
		f.test.noUpfrontCheck, f.test.noSocketCheck, f.test.noConnCheck = true, true, true
		defer f.Close()
		before := hits.Load()
		if out, err := f.Fetch(t.Context(), FetchArgs{URL: url}); err != nil || hits.Load() != before+1 {
			t.Fatalf("with every check off, Fetch(%s) = %q, %v; want the server reached", url, out, err)
		}
	}
	reach()
	want := "fetch refused: " + a.String() + " is an address of this machine"
	for _, upfront := range []bool{true, false} {
		conns, served := srv.conns.Load(), hits.Load()
		f := newFetcher()
		f.test.noUpfrontCheck = !upfront
		out, err := f.Fetch(t.Context(), FetchArgs{URL: url})
		f.Close()
		if !errors.Is(err, ErrFetchRefused) || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("upfront check %v: Fetch(%s) = %q, %v; want a refusal starting %q", upfront, url, out, err, want)
		}
		if hits.Load() != served {
			t.Errorf("upfront check %v: the server answered %d requests, want 0", upfront, hits.Load()-served)
		}
		reach()
		if n := srv.conns.Load() - conns - 1; beforeConnect && n != 0 {
			t.Errorf("upfront check %v: the server accepted %d connections, want 0 (refused before connect)", upfront, n)
		}
	}
}

// inPrefixes reports whether a is in one of ps.
func inPrefixes(ps []netip.Prefix, a netip.Addr) bool {
	return slices.ContainsFunc(ps, func(p netip.Prefix) bool { return p.Contains(a) })
}

package tools

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

func TestClassify(t *testing.T) {
	t.Parallel()
	tests := []struct {
		addr string
		want string // "" = open (public); otherwise a substring of the class
	}{
		// Public addresses, including the edges of the closed ranges.
		{"8.8.8.8", ""},
		{"1.1.1.1", ""},
		{"93.184.216.34", ""},
		{"11.0.0.1", ""},
		{"9.255.255.255", ""},
		{"172.15.255.255", ""},
		{"172.32.0.1", ""},
		{"192.169.0.1", ""},
		{"100.63.255.255", ""},
		{"100.128.0.0", ""},
		{"169.253.255.255", ""},
		{"126.255.255.255", ""},
		{"128.0.0.1", ""},
		{"223.255.255.255", ""},
		{"2606:4700::1", ""},
		{"2001:4860:4860::8888", ""},
		{"::ffff:8.8.8.8", ""},
		{"64:ff9b::808:808", ""},                             // NAT64 of 8.8.8.8
		{"2002:808:808::1", ""},                              // 6to4 of 8.8.8.8
		{"2001:0:4136:e378:8000:63bf:f7f7:f7f7", ""},         // Teredo, client 8.8.8.8
		{"fbff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", ""},      // just below fc00::/7
		{"fe00::1", ""},                                      // between fc00::/7 and fe80::/10
		{"2001:db9::1", ""},                                  // just past documentation
		{"64:ff9a:ffff:ffff:ffff:ffff:ffff:ffff", ""},        // just below NAT64
		{"2003::1", ""},                                      // just past 6to4
		{"2002::1", "unspecified"},                           // 6to4 of 0.0.0.0
		{"2001:0:4136:e378:8000:63bf:80ff:fffe", "loopback"}, // Teredo, client 127.0.0.1

		// Loopback.
		{"127.0.0.1", "loopback"},
		{"127.0.0.2", "loopback"},
		{"127.255.255.254", "loopback"},
		{"::1", "loopback"},
		{"::ffff:127.0.0.1", "loopback"},
		{"::ffff:7f00:2", "loopback"},
		{"64:ff9b::7f00:1", "loopback"},
		{"2002:7f00:1::1", "loopback"},
		// Private.
		{"10.0.0.1", "private"},
		{"10.255.255.255", "private"},
		{"172.16.0.1", "private"},
		{"172.31.255.255", "private"},
		{"192.168.1.1", "private"},
		{"::ffff:10.0.0.1", "private"},
		{"::ffff:192.168.0.1", "private"},
		{"64:ff9b::a00:1", "private"},
		{"64:ff9b::c0a8:101", "private"},
		{"2002:a00:1::1", "private"},
		{"2002:c0a8:101::", "private"},
		{"fc00::1", "private"},
		{"fd12:3456:789a::1", "private"},
		{"fec0::1", "site-local"},
		// CGNAT.
		{"100.64.0.1", "carrier-grade NAT"},
		{"100.127.255.255", "carrier-grade NAT"},
		{"100.100.100.199", "carrier-grade NAT"},
		{"100.100.100.201", "carrier-grade NAT"},
		{"::ffff:100.64.0.1", "carrier-grade NAT"},
		// Link-local and cloud metadata.
		{"169.254.0.1", "link-local"},
		{"169.254.169.253", "link-local"},
		{"fe80::1", "link-local"},
		{"fe80::1%eth0", "link-local"},
		{"febf::1", "link-local"},
		{"169.254.169.254", "metadata"},
		{"::ffff:169.254.169.254", "metadata"},
		{"64:ff9b::a9fe:a9fe", "metadata"},
		{"2002:a9fe:a9fe::", "metadata"},
		{"fd00:ec2::254", "metadata"},
		{"169.254.170.2", "ECS credentials"},
		{"169.254.170.23", "EKS Pod Identity"},
		{"fd00:ec2::23", "EKS Pod Identity"},
		{"100.100.100.200", "Alibaba Cloud metadata"},
		{"::ffff:100.100.100.200", "Alibaba Cloud metadata"},
		{"64:ff9b::a9fe:aa02", "ECS credentials"}, // NAT64 of 169.254.170.2
		{"169.254.170.3", "link-local"},
		{"fd00:ec2::22", "unique local"},
		{"192.0.0.192", "Oracle Cloud metadata"},
		{"192.0.0.191", "reserved"},
		// Metadata services outside the ranges above, or inside ranges an
		// owner may open: each is closed as itself.
		{"168.63.129.16", "Azure WireServer"}, // public address space
		{"168.63.129.15", ""},
		{"168.63.129.17", ""},
		{"::ffff:168.63.129.16", "Azure WireServer"},
		{"64:ff9b::a83f:8110", "Azure WireServer"}, // NAT64 of 168.63.129.16
		{"2002:a83f:8110::1", "Azure WireServer"},  // 6to4 of 168.63.129.16
		{"169.254.0.23", "Tencent Cloud metadata"},
		{"169.254.0.22", "link-local"},
		{"169.254.169.252", "GKE metadata"},
		{"fd20:ce::254", "Google Cloud metadata"},
		{"fd00:100::100:200", "Alibaba Cloud metadata"},
		{"fd00:c1::a9fe:a9fe", "Oracle Cloud metadata"},
		{"169.254.42.42", "Scaleway metadata"},
		{"fd00:42::42", "Scaleway metadata"},
		{"fd00:a9fe:a9fe::1", "Linode"},
		{"fe80::a9fe:a9fe", "metadata"},
		{"fe80::a9fe:a9fe%eth0", "metadata"},
		// Unspecified, multicast, broadcast, reserved.
		{"0.0.0.0", "unspecified"},
		{"0.1.2.3", "reserved"},
		{"::", "unspecified"},
		{"::ffff:0.0.0.0", "unspecified"},
		{"224.0.0.1", "multicast"},
		{"239.255.255.250", "multicast"},
		{"ff02::1", "multicast"},
		{"ff05::1:3", "multicast"},
		{"::ffff:224.0.0.1", "multicast"},
		{"255.255.255.255", "broadcast"},
		{"::ffff:255.255.255.255", "broadcast"},
		{"240.0.0.1", "reserved"},
		{"198.18.0.1", "benchmarking"},
		{"192.0.2.1", "documentation"},
		{"2001:db8::1", "documentation"},
		{"::7f00:1", "IPv4-compatible"},
		{"100::1", "discard"},
		{"64:ff9b:1::a00:1", "local-use NAT64"},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			c, closed := classify(netip.MustParseAddr(tt.addr))
			switch {
			case tt.want == "" && closed:
				t.Errorf("classify(%s) = closed (%s), want open", tt.addr, c.what)
			case tt.want != "" && !closed:
				t.Errorf("classify(%s) = open, want closed as %q", tt.addr, tt.want)
			case tt.want != "" && !strings.Contains(c.what, tt.want):
				t.Errorf("classify(%s) = %q, want it to say %q", tt.addr, c.what, tt.want)
			}
		})
	}
}

func TestAddrGuardAllow(t *testing.T) {
	t.Parallel()
	tests := []struct {
		allow []string
		addr  string
		open  bool
	}{
		{nil, "10.0.0.1", false},
		{[]string{"10.0.0.0/8"}, "10.1.2.3", true},
		{[]string{"10.0.0.0/8"}, "::ffff:10.1.2.3", true},
		{[]string{"10.0.0.0/8"}, "64:ff9b::a01:203", true}, // the same destination through NAT64
		{[]string{"10.0.0.0/8"}, "192.168.1.1", false},
		{[]string{"10.1.2.3/8"}, "10.9.9.9", true}, // unmasked entries are masked
		{[]string{"127.0.0.1/32"}, "127.0.0.1", true},
		{[]string{"127.0.0.1/32"}, "127.0.0.2", false},
		{[]string{"127.0.0.0/8"}, "::1", false},
		{[]string{"::1/128"}, "::1", true},
		{[]string{"fd00::/8"}, "fd12::1", true},
		// A metadata address needs an entry naming exactly it.
		{[]string{"169.254.0.0/16"}, "169.254.1.1", true},
		{[]string{"169.254.0.0/16"}, "169.254.169.254", false},
		{[]string{"0.0.0.0/0"}, "169.254.169.254", false},
		{[]string{"169.254.169.254/32"}, "169.254.169.254", true},
		{[]string{"169.254.169.254/32"}, "::ffff:169.254.169.254", true},
		{[]string{"fd00::/8"}, "fd00:ec2::254", false},
		{[]string{"fd00:ec2::254/128"}, "fd00:ec2::254", true},
		// So does every other credential service inside a range an owner
		// may open for a device or a VPN.
		{[]string{"169.254.0.0/16"}, "169.254.170.2", false},
		{[]string{"169.254.170.0/24"}, "169.254.170.2", false},
		{[]string{"169.254.170.2/32"}, "169.254.170.2", true},
		{[]string{"169.254.0.0/16"}, "169.254.170.23", false},
		{[]string{"169.254.170.23/32"}, "169.254.170.23", true},
		{[]string{"169.254.0.0/16"}, "64:ff9b::a9fe:aa17", false}, // NAT64 of 169.254.170.23
		{[]string{"fd00::/8"}, "fd00:ec2::23", false},
		{[]string{"fc00::/7"}, "fd00:ec2::23", false},
		{[]string{"fd00:ec2::23/128"}, "fd00:ec2::23", true},
		{[]string{"100.64.0.0/10"}, "100.100.100.200", false},
		{[]string{"100.64.0.0/10"}, "::ffff:100.100.100.200", false},
		{[]string{"100.100.100.200/32"}, "100.100.100.200", true},
		// Azure's WireServer is a public address: no range opens it,
		// not even the whole internet.
		{nil, "168.63.129.16", false},
		{[]string{"0.0.0.0/0"}, "168.63.129.16", false},
		{[]string{"168.63.0.0/16"}, "168.63.129.16", false},
		{[]string{"168.63.129.16/32"}, "168.63.129.16", true},
		{[]string{"0.0.0.0/0"}, "64:ff9b::a83f:8110", false},
		{nil, "168.63.129.17", true},
		// The other providers' services inside ranges an owner may open.
		{[]string{"169.254.0.0/16"}, "169.254.0.23", false},
		{[]string{"169.254.0.0/24"}, "169.254.0.23", false},
		{[]string{"169.254.0.23/32"}, "169.254.0.23", true},
		{[]string{"169.254.0.0/16"}, "169.254.169.252", false},
		{[]string{"169.254.0.0/16"}, "169.254.42.42", false},
		{[]string{"192.0.0.0/24"}, "192.0.0.192", false},
		{[]string{"192.0.0.192/32"}, "192.0.0.192", true},
		{[]string{"fc00::/7"}, "fd20:ce::254", false},
		{[]string{"fd00::/8"}, "fd00:100::100:200", false},
		{[]string{"fd00::/8"}, "fd00:c1::a9fe:a9fe", false},
		{[]string{"fd00::/8"}, "fd00:42::42", false},
		{[]string{"fd00::/8"}, "fd00:a9fe:a9fe::1", false},
		{[]string{"fe80::/10"}, "fe80::a9fe:a9fe", false},
		{[]string{"fe80::/10"}, "fe80::a9fe:a9fe%eth0", false},
		{[]string{"fe80::a9fe:a9fe/128"}, "fe80::a9fe:a9fe", true},
		// The rest of those ranges opens as before.
		{[]string{"169.254.0.0/16"}, "169.254.170.3", true},
		{[]string{"169.254.0.0/16"}, "169.254.0.22", true},
		{[]string{"192.0.0.0/24"}, "192.0.0.191", true},
		{[]string{"fe80::/10"}, "fe80::1", true},
		{[]string{"100.64.0.0/10"}, "100.100.100.100", true},
		{[]string{"fd00::/8"}, "fd00:ec2::22", true},
		// Public addresses need no entry.
		{nil, "8.8.8.8", true},
		{nil, "2606:4700::1", true},
	}
	for _, tt := range tests {
		var allow []netip.Prefix
		for _, p := range tt.allow {
			allow = append(allow, netip.MustParsePrefix(p))
		}
		err := testGuard(allow).check(netip.MustParseAddr(tt.addr))
		if got := err == nil; got != tt.open {
			t.Errorf("allow %v, check(%s) = %v; want open=%v", tt.allow, tt.addr, err, tt.open)
		}
		if err != nil && !errors.Is(err, ErrFetchRefused) {
			t.Errorf("check(%s) = %v, want it to wrap ErrFetchRefused", tt.addr, err)
		}
	}
}

func TestAddrGuardMessage(t *testing.T) {
	t.Parallel()
	g := testGuard(nil)
	tests := []struct{ addr, want string }{
		{"10.0.0.1", `fetch refused: 10.0.0.1 is a private address (allow it with [agent.fetch] allow = ["10.0.0.1/32"])`},
		{"::ffff:127.0.0.1", `fetch refused: ::ffff:127.0.0.1 is a loopback address (allow it with [agent.fetch] allow = ["127.0.0.1/32"])`},
		{"64:ff9b::a00:1", `fetch refused: 64:ff9b::a00:1 leads to 10.0.0.1, a private address (allow it with [agent.fetch] allow = ["10.0.0.1/32"])`},
		{"fe80::1", `fetch refused: fe80::1 is a link-local address (allow it with [agent.fetch] allow = ["fe80::1/128"])`},
		{"169.254.169.254", `fetch refused: 169.254.169.254 is the cloud metadata service address, which hands out the machine's credentials`},
		{"169.254.170.2", `fetch refused: 169.254.170.2 is the AWS ECS credentials endpoint, which hands out the machine's credentials`},
		{"100.100.100.200", `fetch refused: 100.100.100.200 is the Alibaba Cloud metadata service address, which hands out the machine's credentials`},
		{"168.63.129.16", `fetch refused: 168.63.129.16 is the Azure WireServer address, which hands out the machine's credentials`},
		{"169.254.0.23", `fetch refused: 169.254.0.23 is the Tencent Cloud metadata service address, which hands out the machine's credentials`},
	}
	for _, tt := range tests {
		err := g.check(netip.MustParseAddr(tt.addr))
		if err == nil || err.Error() != tt.want {
			t.Errorf("check(%s):\n got %v\nwant %s", tt.addr, err, tt.want)
		}
	}
}

// TestCheckSocket calls the Control hook directly, as the dialer would just
// before connect(2); no socket is involved, so nothing can leave the host.
func TestCheckSocket(t *testing.T) {
	t.Parallel()
	g := testGuard([]netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")})
	tests := []struct {
		network, address string
		open             bool
	}{
		{"tcp4", "8.8.8.8:443", true},
		{"tcp6", "[2606:4700::1]:443", true},
		{"tcp4", "127.0.0.1:8080", true},
		{"tcp6", "[::ffff:127.0.0.1]:8080", true},
		{"tcp4", "127.0.0.2:8080", false},
		{"tcp4", "10.0.0.1:80", false},
		{"tcp4", "169.254.169.254:80", false},
		{"tcp4", "0.0.0.0:80", false},
		{"tcp6", "[::1]:80", false},
		{"tcp6", "[::ffff:10.0.0.1]:80", false},
		{"tcp6", "[fe80::1%eth0]:80", false},
		{"tcp6", "[fd00:ec2::254]:80", false},
		{"tcp4", "168.63.129.16:80", false},
		{"tcp4", "168.63.129.16:32526", false},
		{"tcp6", "[::ffff:168.63.129.16]:80", false},
		{"tcp4", "169.254.0.23:80", false},
		{"tcp6", "[fd20:ce::254]:80", false},
		{"tcp6", "[fe80::a9fe:a9fe%eth0]:80", false},
		{"tcp4", "169.254.170.2:80", false},
		{"tcp4", "100.100.100.200:80", false},
		{"tcp6", "[64:ff9b::a9fe:a9fe]:80", false},
		{"tcp", "not-an-address", false},
		{"tcp", "example.com:80", false},
	}
	for _, tt := range tests {
		err := g.checkSocket(tt.network, tt.address, nil)
		if got := err == nil; got != tt.open {
			t.Errorf("checkSocket(%s, %s) = %v; want open=%v", tt.network, tt.address, err, tt.open)
		}
	}
}

func TestIsCredentialHeader(t *testing.T) {
	t.Parallel()
	secret := []string{
		"Set-Cookie", "Cookie", "Authorization", "Proxy-Authorization",
		"X-Amz-Security-Token", "X-Api-Key", "x-apikey", "X_API_KEY",
		"X-Auth-Token", "X-CSRF-Token", "X-XSRF-TOKEN", "X-Session-Id",
		"X-Client-Secret", "Authentication-Info", "X-Goog-Api-Key",
		"X-Amz-Access-Key", "X-Hub-Signature-256", "X-Password",
	}
	public := []string{
		"WWW-Authenticate", "Proxy-Authenticate", "Content-Type",
		"Content-Length", "Location", "X-Request-Id", "Cache-Control",
		"Strict-Transport-Security", "Content-Security-Policy", "Link",
	}
	for _, name := range secret {
		if !isCredentialHeader(name) {
			t.Errorf("isCredentialHeader(%q) = false, want true", name)
		}
	}
	for _, name := range public {
		if isCredentialHeader(name) {
			t.Errorf("isCredentialHeader(%q) = true, want false", name)
		}
	}
}

func TestScrub(t *testing.T) {
	t.Parallel()
	var secrets []string
	secrets = appendSecret(secrets, "Bearer sk-live-0123456789")
	secrets = appendSecret(secrets, "sid=abcdefgh1234; theme=dark")
	secrets = appendSecret(secrets, "short") // too short to scrub
	tests := []struct{ in, want string }{
		{"auth was Bearer sk-live-0123456789.", "auth was [redacted]."},
		{`{"token":"sk-live-0123456789"}`, `{"token":"[redacted]"}`},
		{"cookie sid=abcdefgh1234; theme=dark", "cookie [redacted]"},
		{"sid is abcdefgh1234", "sid is [redacted]"},
		{"a short Bearer word", "a short Bearer word"},
	}
	for _, tt := range tests {
		if got := scrub(tt.in, secrets); got != tt.want {
			t.Errorf("scrub(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestFetchDNSRebinding is the attack the socket check exists for. The name
// answers a public address when the upfront check looks it up and
// 127.0.0.1 when the dialer looks it up a moment later. A fetcher with only
// the upfront check connects to the loopback server (second case, the
// checks at the socket switched off through the test knobs); the real
// fetcher is stopped in the dialer, before connect(2).
func TestFetchDNSRebinding(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		noSocketCheck bool
	}{
		{"socket check", false},
		{"upfront check only", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var hits atomic.Int32
			srv := newLoopbackServer(t, "127.0.0.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				hits.Add(1)
				io.WriteString(w, "router admin page")
			}))
			var aQueries atomic.Int32
			dns := newFakeDNS(t, func(name string, qtype uint16) ([]netip.Addr, bool) {
				if name != "rebind.test" {
					return nil, false
				}
				if qtype == dnsTypeA && aQueries.Add(1) == 1 {
					return []netip.Addr{netip.MustParseAddr("93.184.216.34")}, true
				}
				return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, true
			})
			f := newTestFetcher(t, FetchOptions{}, dns)
			f.test.noSocketCheck = tt.noSocketCheck
			f.test.noConnCheck = tt.noSocketCheck

			out, err := f.Fetch(t.Context(), FetchArgs{URL: "http://rebind.test:" + srv.port + "/"})
			if n := aQueries.Load(); n < 2 {
				t.Fatalf("the name was looked up %d times, want 2 (upfront, then dial): the test did not rebind", n)
			}
			if tt.noSocketCheck {
				if err != nil || !strings.Contains(out, "router admin page") || hits.Load() != 1 {
					t.Fatalf("without the socket check: err %v, %d hits, result %q; want the rebinding to reach the server", err, hits.Load(), out)
				}
				return
			}
			if !errors.Is(err, ErrFetchRefused) {
				t.Fatalf("Fetch = %q, %v; want a refusal", out, err)
			}
			// The upfront check would have said "rebind.test: …".
			if want := "fetch refused: 127.0.0.1 is a loopback address"; !strings.HasPrefix(err.Error(), want) {
				t.Errorf("error %q, want it to start with %q (the socket check's message)", err, want)
			}
			if n := srv.conns.Load(); n != 0 {
				t.Errorf("the loopback server accepted %d connections, want 0", n)
			}
		})
	}
}

// DNS record types the fake server answers.
const (
	dnsTypeA    = 1
	dnsTypeAAAA = 28
)

// fakeDNS is a DNS server on loopback UDP, enough of one for Go's resolver:
// it answers A and AAAA questions from answer, NXDOMAIN for names answer
// does not know. Tests resolve every name through it: the machine's
// nameserver is not on loopback, and tests send nothing off loopback.
type fakeDNS struct {
	conn   net.PacketConn
	answer func(name string, qtype uint16) (addrs []netip.Addr, known bool)
}

func newFakeDNS(t *testing.T, answer func(name string, qtype uint16) ([]netip.Addr, bool)) *fakeDNS {
	t.Helper()
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if answer == nil {
		answer = func(string, uint16) ([]netip.Addr, bool) { return nil, false }
	}
	d := &fakeDNS{conn: conn, answer: func(name string, qtype uint16) ([]netip.Addr, bool) {
		if name == "localhost" { // in case /etc/hosts does not say
			return []netip.Addr{netip.IPv6Loopback(), netip.MustParseAddr("127.0.0.1")}, true
		}
		return answer(name, qtype)
	}}
	var wg sync.WaitGroup
	wg.Go(d.serve)
	t.Cleanup(func() {
		conn.Close()
		wg.Wait()
	})
	return d
}

// resolver returns a pure-Go resolver that sends every query to d. It still
// reads /etc/hosts first, as the real one does.
func (d *fakeDNS) resolver() *net.Resolver {
	return &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var nd net.Dialer
			return nd.DialContext(ctx, "udp", d.conn.LocalAddr().String())
		},
	}
}

func (d *fakeDNS) serve() {
	buf := make([]byte, 1500)
	for {
		n, from, err := d.conn.ReadFrom(buf)
		if err != nil {
			return
		}
		if resp := d.reply(buf[:n]); resp != nil {
			d.conn.WriteTo(resp, from)
		}
	}
}

// reply builds the response to query, or nil for a query it cannot parse.
func (d *fakeDNS) reply(query []byte) []byte {
	if len(query) < 12 {
		return nil
	}
	var labels []string
	i := 12
	for {
		if i >= len(query) {
			return nil
		}
		l := int(query[i])
		i++
		if l == 0 {
			break
		}
		if l&0xc0 != 0 || i+l > len(query) {
			return nil
		}
		labels = append(labels, string(query[i:i+l]))
		i += l
	}
	if i+4 > len(query) {
		return nil
	}
	qtype := binary.BigEndian.Uint16(query[i:])
	i += 4
	addrs, known := d.answer(strings.ToLower(strings.Join(labels, ".")), qtype)
	var records []netip.Addr
	for _, a := range addrs {
		if qtype == dnsTypeA && a.Is4() || qtype == dnsTypeAAAA && a.Is6() {
			records = append(records, a)
		}
	}
	flags := uint16(0x8580) // response, authoritative, recursion desired and available
	if !known {
		flags |= 3 // NXDOMAIN
	}
	resp := append([]byte(nil), query[:2]...) // ID
	resp = binary.BigEndian.AppendUint16(resp, flags)
	resp = binary.BigEndian.AppendUint16(resp, 1) // questions
	resp = binary.BigEndian.AppendUint16(resp, uint16(len(records)))
	resp = binary.BigEndian.AppendUint16(resp, 0) // authority
	resp = binary.BigEndian.AppendUint16(resp, 0) // additional
	resp = append(resp, query[12:i]...)
	for _, a := range records {
		resp = append(resp, 0xc0, 12) // the name: a pointer to the question's
		resp = binary.BigEndian.AppendUint16(resp, qtype)
		resp = binary.BigEndian.AppendUint16(resp, 1) // class IN
		resp = binary.BigEndian.AppendUint32(resp, 0) // TTL
		b := a.AsSlice()
		resp = binary.BigEndian.AppendUint16(resp, uint16(len(b)))
		resp = append(resp, b...)
	}
	return resp
}

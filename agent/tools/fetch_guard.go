package tools

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"syscall"
)

// ErrFetchRefused is wrapped by every error Fetch returns because latch's
// policy, not the network, said no: a destination address outside what the
// owner opened, a scheme other than http/https, an https → http redirect.
var ErrFetchRefused = errors.New("fetch refused")

// refusedError is a refusal in one sentence the model can act on.
type refusedError struct{ detail string }

func (e *refusedError) Error() string { return "fetch refused: " + e.detail }
func (e *refusedError) Unwrap() error { return ErrFetchRefused }

func refusef(format string, args ...any) error {
	return &refusedError{detail: fmt.Sprintf(format, args...)}
}

// addrClass says why an address is closed by default.
type addrClass struct {
	what string // "a loopback address"; completes "<addr> is …"
	// inner is the IPv4 address a translation prefix (NAT64, 6to4, Teredo)
	// carries, when that address, not the IPv6 one, is what is closed.
	inner netip.Addr
	// exact means that only an Allow entry naming exactly this address opens
	// it: a cloud metadata service hands out the machine's credentials, so
	// opening 169.254.0.0/16 for a link-local device must not open it too.
	exact bool
	// credentials marks a metadata service; its refusal gives no hint how
	// to open it.
	credentials bool
}

type classRange struct {
	prefix netip.Prefix
	class  addrClass
}

func closed(prefix, what string) classRange {
	return classRange{prefix: netip.MustParsePrefix(prefix), class: addrClass{what: what}}
}

// metadata is a cloud service that hands out the machine's credentials.
func metadata(addr, what string) classRange {
	a := netip.MustParseAddr(addr)
	return classRange{
		prefix: netip.PrefixFrom(a, a.BitLen()),
		class:  addrClass{what: what, exact: true, credentials: true},
	}
}

// closedRanges are the destinations a fetch may not reach unless the owner
// allows them: everything that is not the public internet. Order matters,
// the first match wins: the credential services come first because each
// sits inside a range an owner may well open (169.254.0.0/16 for a device
// on the link, 100.64.0.0/10 for a Tailscale network, fd00::/8 for a ULA
// LAN), or in public space (Azure's WireServer), and opening that range
// must not open them.
var closedRanges = []classRange{
	// 169.254.169.254 serves AWS, Google Cloud, Azure, Oracle Cloud,
	// OpenStack, DigitalOcean, Hetzner, Linode and others.
	metadata("169.254.169.254", "the cloud metadata service address"),
	metadata("fd00:ec2::254", "the cloud metadata service address"),
	metadata("fd20:ce::254", "the Google Cloud metadata service address"),
	metadata("169.254.169.252", "the GKE metadata server address"),
	metadata("169.254.170.2", "the AWS ECS credentials endpoint"),
	metadata("169.254.170.23", "the AWS EKS Pod Identity credentials endpoint"),
	metadata("fd00:ec2::23", "the AWS EKS Pod Identity credentials endpoint"),
	// The WireServer hands the VM agent its goal state, extension
	// settings and certificates.
	metadata("168.63.129.16", "the Azure WireServer address"),
	metadata("100.100.100.200", "the Alibaba Cloud metadata service address"),
	metadata("fd00:100::100:200", "the Alibaba Cloud metadata service address"),
	metadata("169.254.0.23", "the Tencent Cloud metadata service address"),
	metadata("fd00:c1::a9fe:a9fe", "the Oracle Cloud metadata service address"),
	metadata("192.0.0.192", "the Oracle Cloud metadata service address"), // OCI Classic
	metadata("169.254.42.42", "the Scaleway metadata service address"),
	metadata("fd00:42::42", "the Scaleway metadata service address"),
	metadata("fd00:a9fe:a9fe::1", "the Akamai (Linode) metadata service address"),
	// OpenStack's and Linode's IPv6 metadata address is link-local; the
	// zone is dropped before the check, so it is closed on every interface.
	metadata("fe80::a9fe:a9fe", "the cloud metadata service address"),

	// IPv4. Mapped IPv6 forms (::ffff:a.b.c.d) are unmapped before lookup.
	closed("0.0.0.0/32", "an unspecified address"), // Linux connects it to the local host
	closed("0.0.0.0/8", "a reserved address"),
	closed("127.0.0.0/8", "a loopback address"),
	closed("10.0.0.0/8", "a private address"),
	closed("172.16.0.0/12", "a private address"),
	closed("192.168.0.0/16", "a private address"),
	closed("100.64.0.0/10", "a shared (carrier-grade NAT) address"),
	closed("169.254.0.0/16", "a link-local address"),
	closed("192.0.0.0/24", "a reserved address"), // IETF protocol assignments
	closed("192.0.2.0/24", "a documentation address"),
	closed("198.51.100.0/24", "a documentation address"),
	closed("203.0.113.0/24", "a documentation address"),
	closed("198.18.0.0/15", "a reserved (benchmarking) address"),
	closed("224.0.0.0/4", "a multicast address"),
	closed("255.255.255.255/32", "the broadcast address"),
	closed("240.0.0.0/4", "a reserved address"),

	// IPv6.
	closed("::/128", "an unspecified address"),
	closed("::1/128", "a loopback address"),
	closed("::/96", "a reserved (IPv4-compatible) address"),
	closed("fc00::/7", "a private (unique local) address"),
	closed("fe80::/10", "a link-local address"),
	closed("fec0::/10", "a private (site-local) address"),
	closed("ff00::/8", "a multicast address"),
	closed("100::/64", "a reserved (discard) address"),
	closed("2001:db8::/32", "a documentation address"),
	closed("64:ff9b:1::/48", "a local-use NAT64 address"),
}

// Translation prefixes carry an IPv4 address inside an IPv6 one; the
// translator on the way connects to that IPv4 address, so it is the one to
// check. A NAT64 address of a public IPv4 host is fine (that is what NAT64
// is for); one of 10.0.0.1 reaches 10.0.0.1.
var (
	nat64Prefix  = netip.MustParsePrefix("64:ff9b::/96") // RFC 6052: v4 in the last 32 bits
	sixToFour    = netip.MustParsePrefix("2002::/16")    // RFC 3056: v4 in bits 16–47
	teredoPrefix = netip.MustParsePrefix("2001::/32")    // RFC 4380: client v4, inverted, in the last 32 bits
)

// classify reports whether a is closed by default, and why. It does not
// look at Allow; see addrGuard.check.
func classify(a netip.Addr) (addrClass, bool) {
	a = a.WithZone("").Unmap()
	for _, r := range closedRanges {
		if r.prefix.Contains(a) {
			return r.class, true
		}
	}
	if inner, ok := embeddedIPv4(a); ok {
		if c, closed := classify(inner); closed {
			c.inner = inner
			return c, true
		}
	}
	return addrClass{}, false
}

// embeddedIPv4 returns the IPv4 address a NAT64, 6to4 or Teredo address
// leads to.
func embeddedIPv4(a netip.Addr) (netip.Addr, bool) {
	if !a.Is6() {
		return netip.Addr{}, false
	}
	b := a.As16()
	switch {
	case nat64Prefix.Contains(a):
		return netip.AddrFrom4([4]byte(b[12:16])), true
	case sixToFour.Contains(a):
		return netip.AddrFrom4([4]byte(b[2:6])), true
	case teredoPrefix.Contains(a):
		return netip.AddrFrom4([4]byte{^b[12], ^b[13], ^b[14], ^b[15]}), true
	}
	return netip.Addr{}, false
}

// ownClass reports whether a is an address of this machine that only an
// exact Allow entry opens. local is what machineAddrs returned. The kernel
// delivers a connection to any of the machine's addresses locally, public
// ones included, so it reaches services listening on 0.0.0.0 or :: that a
// firewall keeps from the network. A range the owner opened for the LAN
// (or 0.0.0.0/0) does not open the machine itself. Loopback addresses are
// left to classify: they are closed already, and an Allow entry for them
// is the owner opening the machine on purpose.
func ownClass(a netip.Addr, local []netip.Prefix) (addrClass, bool) {
	a = a.WithZone("").Unmap()
	targets := []netip.Addr{a}
	if inner, ok := embeddedIPv4(a); ok {
		targets = append(targets, inner)
	}
	for i, t := range targets {
		if t.IsLoopback() {
			continue
		}
		for _, p := range local {
			if !p.Contains(t) {
				continue
			}
			c := addrClass{what: "an address of this machine", exact: true}
			if i > 0 {
				c.inner = t
			}
			return c, true
		}
	}
	return addrClass{}, false
}

// machineAddrs lists the addresses a connection to which never leaves this
// machine: every interface address, and for a loopback interface its whole
// prefix, since Linux delivers all of it locally (127.0.0.2 answers
// although lo only holds 127.0.0.1/8). It is read afresh for each check:
// an address can be added at any moment, and reading it costs a few small
// netlink dumps.
func machineAddrs() ([]netip.Prefix, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	ifaces, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	var out []netip.Prefix
	add := func(list []net.Addr, wholePrefix bool) {
		for _, addr := range list {
			var ip net.IP
			bits := -1
			switch v := addr.(type) {
			case *net.IPNet:
				ip = v.IP
				if wholePrefix {
					bits, _ = v.Mask.Size()
				}
			case *net.IPAddr:
				ip = v.IP
			}
			a, ok := netip.AddrFromSlice(ip)
			if !ok {
				continue
			}
			a = a.Unmap()
			if bits < 0 || bits > a.BitLen() {
				bits = a.BitLen()
			}
			out = append(out, netip.PrefixFrom(a, bits).Masked())
		}
	}
	add(addrs, false)
	for _, ifi := range ifaces {
		if ifi.Flags&net.FlagLoopback == 0 {
			continue
		}
		lo, err := ifi.Addrs()
		if err != nil {
			return nil, err
		}
		add(lo, true)
	}
	return out, nil
}

// addrGuard decides which destination addresses a fetch may connect to.
type addrGuard struct {
	allow []netip.Prefix
	// local returns this machine's addresses; machineAddrs, unless a test
	// gives its own list.
	local func() ([]netip.Prefix, error)
}

func newAddrGuard(allow []netip.Prefix) addrGuard {
	g := addrGuard{allow: make([]netip.Prefix, 0, len(allow)), local: machineAddrs}
	for _, p := range allow {
		if p.IsValid() {
			g.allow = append(g.allow, p.Masked())
		}
	}
	return g
}

// check returns nil if a may be connected to, and otherwise a refusal that
// names a and why it is closed, and how to open it. When the machine's
// addresses cannot be read, a is refused: it might be one of them.
func (g addrGuard) check(a netip.Addr) error {
	local, err := g.local()
	if err != nil {
		return refusef("cannot read this machine's addresses to tell whether %s is one (%s)", a.WithZone(""), oneLine(err.Error()))
	}
	return g.decide(a, local)
}

// decide is check with the machine's addresses given. A range the owner
// opened is checked first, so an address both private and the machine's
// keeps the refusal it always had, whose hint opens it for both reasons.
func (g addrGuard) decide(a netip.Addr, local []netip.Prefix) error {
	a = a.WithZone("")
	if c, closed := classify(a); closed && !g.allows(a, c) {
		return &refusedError{detail: describeClosed(a, c)}
	}
	if c, own := ownClass(a, local); own && !g.allows(a, c) {
		return &refusedError{detail: describeClosed(a, c)}
	}
	return nil
}

func (g addrGuard) allows(a netip.Addr, c addrClass) bool {
	targets := []netip.Addr{a, a.Unmap()}
	if c.inner.IsValid() {
		targets = append(targets, c.inner)
	}
	for _, p := range g.allow {
		for _, t := range targets {
			if !p.Contains(t) {
				continue
			}
			if !c.exact || p.Bits() == t.BitLen() {
				return true
			}
		}
	}
	return false
}

// describeClosed completes "fetch refused: …". The hint names the single
// address, not its whole range: the owner should open what the task needs.
func describeClosed(a netip.Addr, c addrClass) string {
	target := a.Unmap()
	s := fmt.Sprintf("%s is %s", a, c.what)
	if c.inner.IsValid() {
		target = c.inner
		s = fmt.Sprintf("%s leads to %s, %s", a, c.inner, c.what)
	}
	if c.credentials {
		return s + ", which hands out the machine's credentials"
	}
	return fmt.Sprintf(`%s (allow it with [agent.fetch] allow = ["%s"])`,
		s, netip.PrefixFrom(target, target.BitLen()))
}

// checkSocket is the Control hook of the fetch dialer. It runs after the
// socket is created and before connect(2), with the address the kernel is
// about to connect to: whatever DNS said a moment ago, whatever host a
// redirect named, this is the address the packets would go to, so it is the
// check that holds. An address that does not parse is refused.
func (g addrGuard) checkSocket(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return refusef("cannot check the address %q of a %s connection", address, network)
	}
	return g.check(ap.Addr())
}

// checkConn runs once the connection is made, behind checkSocket, for a
// destination the machine delivers locally although checkSocket did not
// find it among the machine's addresses: one added in between, or an IPv4
// range routed to lo without being assigned (AnyIP, `ip route add local
// …`). Linux gives such a connection its destination as its source address
// too, so a connection whose two ends share an address never left the
// machine, and is decided as one to it. An IPv6 AnyIP range gets another
// source address and is not caught (SECURITY.md, out of scope).
func (g addrGuard) checkConn(c net.Conn) error {
	local, lok := tcpAddr(c.LocalAddr())
	remote, rok := tcpAddr(c.RemoteAddr())
	if !lok || !rok {
		return refusef("cannot check the addresses of a connection to %s", c.RemoteAddr())
	}
	if local != remote {
		return nil
	}
	return g.decide(remote, []netip.Prefix{netip.PrefixFrom(remote, remote.BitLen())})
}

func tcpAddr(a net.Addr) (netip.Addr, bool) {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return netip.Addr{}, false
	}
	return ta.AddrPort().Addr().WithZone("").Unmap(), true
}

// credentialWords mark a header that carries a credential: Authorization,
// Proxy-Authorization, Set-Cookie, X-Api-Key, X-Auth-Token,
// X-Amz-Security-Token, X-CSRF-Token, X-Session-Id, … Names are matched
// lower-cased with "-", "_" and "." removed, so api-key, api_key and apikey
// are one word. Erring towards hiding costs the model a header value.
var credentialWords = []string{
	"auth", "token", "secret", "session", "cookie", "apikey", "accesskey",
	"privatekey", "password", "passwd", "credential", "signature",
}

var headerSeparators = strings.NewReplacer("-", "", "_", "", ".", "")

// isCredentialHeader reports whether the value of header name is a secret.
func isCredentialHeader(name string) bool {
	n := strings.ToLower(name)
	switch n {
	case "www-authenticate", "proxy-authenticate":
		// A challenge names a scheme and a realm, and the model needs it
		// to tell why it got a 401.
		return false
	}
	n = headerSeparators.Replace(n)
	for _, w := range credentialWords {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// minSecret is the shortest value scrub hides; shorter strings would turn
// up by chance and blank out ordinary text.
const minSecret = 8

// appendSecret adds a credential value, and the tokens it is made of
// ("Bearer sk-…", "a=…; b=…"), to secrets.
func appendSecret(secrets []string, value string) []string {
	add := func(s string) {
		if len(s) >= minSecret && !slices.Contains(secrets, s) {
			secrets = append(secrets, s)
		}
	}
	add(value)
	for _, part := range strings.FieldsFunc(value, func(r rune) bool { return r == ' ' || r == ';' || r == ',' }) {
		add(part)
		if _, v, ok := strings.Cut(part, "="); ok {
			add(v)
		}
	}
	return secrets
}

// scrub replaces every occurrence of a secret in s with [redacted], so a
// server that echoes the request back does not hand the model's credential
// headers into the result.
func scrub(s string, secrets []string) string {
	if len(secrets) == 0 {
		return s
	}
	sorted := slices.Clone(secrets)
	slices.SortFunc(sorted, func(a, b string) int { return len(b) - len(a) }) // longest first
	for _, sec := range sorted {
		s = strings.ReplaceAll(s, sec, "[redacted]")
	}
	return s
}

// managedHeaders are set by the HTTP client; letting the model set them
// would at best be ignored and at worst desynchronize the request.
var managedHeaders = map[string]bool{
	"Host": true, "Content-Length": true, "Transfer-Encoding": true,
	"Connection": true, "Keep-Alive": true, "Proxy-Connection": true,
	"Te": true, "Trailer": true, "Upgrade": true, "Accept-Encoding": true,
}

// validHeaderName reports whether name is an RFC 9110 token.
func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for _, c := range []byte(name) {
		ok := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
		if !ok {
			return false
		}
	}
	return true
}

// validHeaderValue refuses control characters other than tab, which would
// let a value inject further header lines.
func validHeaderValue(v string) bool {
	for _, c := range []byte(v) {
		if c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

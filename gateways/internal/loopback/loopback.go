// Package loopback says whether a host is this machine, the one place an
// adapter and its fake allow plain http (an API override or a webhook
// pointed at a local test server or proxy).
package loopback

import "net"

// Host reports whether host, a URL's host without its port, is
// "localhost" or a loopback address.
func Host(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

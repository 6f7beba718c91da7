package loopback

import "testing"

func TestHost(t *testing.T) {
	for host, want := range map[string]bool{
		"localhost": true, "127.0.0.1": true, "127.8.9.10": true, "::1": true,
		"example.com": false, "10.0.0.1": false, "": false, "localhost.example": false,
	} {
		if got := Host(host); got != want {
			t.Errorf("Host(%q) = %t, want %t", host, got, want)
		}
	}
}

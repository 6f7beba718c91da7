package main

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// What a gateway's HTTP client holds between messages: a long poll waiting
// on the server and one idle connection left by the last send, on a clone
// of http.DefaultTransport as the Telegram and Discord adapters make it.
// The fakes speak plain HTTP; the real APIs speak TLS, and HTTP/2 where the
// server offers it (the clone attempts it), so this measures the three.
// The server runs in a child process, so only the client's heap and
// stacks are counted:
//
//	go test ./bench -run '^$' -bench IdleClient -benchtime 1x
func BenchmarkIdleClient(b *testing.B) {
	for _, mode := range []string{"http1", "https1", "https2"} {
		for _, big := range []bool{false, true} {
			name := mode
			if big {
				name += "/after-32KiB"
			}
			b.Run(name, func(b *testing.B) {
				url, pool := startConnServer(b, mode)
				for b.Loop() {
					b.ReportMetric(idleClientBytes(b, mode, url, pool, big), "B/client")
				}
			})
		}
	}
}

// idleClientBytes opens clients of the mode, each with a long poll held
// and an idle connection, and returns their heap and stack bytes each.
// With big, the first answer each connection reads is 32 KiB (a batch of
// updates, a message history), which grows the buffers that keep their size.
func idleClientBytes(b *testing.B, mode, url string, pool *x509.CertPool, big bool) float64 {
	const clients = 20
	settle := func() uint64 {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc + m.StackInuse
	}
	before := settle()
	var polls sync.WaitGroup
	var made []*http.Transport
	for range clients {
		t := http.DefaultTransport.(*http.Transport).Clone()
		switch mode {
		case "https1":
			t.TLSClientConfig = &tls.Config{RootCAs: pool}
			t.ForceAttemptHTTP2 = false
			t.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
		case "https2":
			t.TLSClientConfig = &tls.Config{RootCAs: pool}
		}
		made = append(made, t)
		c := &http.Client{Transport: t}
		send := func(path string) {
			resp, err := c.Post(url+path, "application/json", strings.NewReader(`{"chat_id":1,"text":"hi"}`))
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if mode == "https2" && resp.ProtoMajor != 2 {
				b.Fatalf("got HTTP/%d, want HTTP/2", resp.ProtoMajor)
			}
		}
		first := "/send"
		if big {
			first = "/big"
		}
		send(first) // the connection the poll then takes (HTTP/1) or shares (HTTP/2)
		polls.Go(func() {
			resp, err := c.Get(url + "/poll")
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
		time.Sleep(20 * time.Millisecond) // the poll is out: the next send needs a connection of its own
		send(first)
	}
	after := settle()
	for _, t := range made {
		t.CloseIdleConnections()
	}
	rt := http.DefaultTransport.(*http.Transport).Clone()
	rt.TLSClientConfig = &tls.Config{RootCAs: pool}
	if resp, err := (&http.Client{Transport: rt}).Get(url + "/release"); err == nil {
		resp.Body.Close()
	}
	rt.CloseIdleConnections()
	for _, t := range made {
		t.CloseIdleConnections() // the polls' connections, now answered
	}
	polls.Wait()
	return float64(int64(after)-int64(before)) / clients
}

// startConnServer starts the child process serving mode and returns its
// URL and the pool that trusts its certificate.
func startConnServer(b *testing.B, mode string) (string, *x509.CertPool) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestConnServer$")
	cmd.Env = append(os.Environ(), "BENCH_CONN_SERVER="+mode)
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	r := bufio.NewReader(out)
	url, err := r.ReadString('\n')
	if err != nil {
		b.Fatal(err)
	}
	pemText, _ := io.ReadAll(io.LimitReader(r, 1<<16))
	pool := x509.NewCertPool()
	if block, _ := pem.Decode(pemText); block != nil {
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			b.Fatal(err)
		}
		pool.AddCert(cert)
	}
	return strings.TrimSpace(url), pool
}

// TestConnServer is BenchmarkIdleClient's server when BENCH_CONN_SERVER is
// set: /poll waits until the next /release, /send answers at once, /big
// with 32 KiB. It prints its URL
// and, for TLS, its certificate, and serves until killed.
func TestConnServer(t *testing.T) {
	mode := os.Getenv("BENCH_CONN_SERVER")
	if mode == "" {
		t.Skip("the helper process of BenchmarkIdleClient: runs only as its child")
	}
	var mu sync.Mutex
	release := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/poll", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		wait := release
		mu.Unlock()
		select {
		case <-wait:
		case <-r.Context().Done():
		}
		fmt.Fprint(w, `{"ok":true,"result":[]}`)
	})
	mux.HandleFunc("/send", func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		fmt.Fprint(w, `{"ok":true,"result":{"message_id":1}}`)
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, `{"ok":true,"result":%q}`, strings.Repeat("x", 32<<10))
	})
	mux.HandleFunc("/release", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		close(release)
		release = make(chan struct{})
		mu.Unlock()
	})
	srv := httptest.NewUnstartedServer(mux)
	switch mode {
	case "http1":
		srv.Start()
		fmt.Println(srv.URL)
	default:
		srv.EnableHTTP2 = mode == "https2"
		srv.StartTLS()
		fmt.Println(srv.URL)
		pem.Encode(os.Stdout, &pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	}
	os.Stdout.Close()
	select {}
}

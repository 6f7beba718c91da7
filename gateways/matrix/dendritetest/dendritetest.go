// Package dendritetest runs a real Matrix homeserver, Dendrite, on loopback
// for latch's tests: a throwaway configuration (SQLite files in a temporary
// folder, federation off, a random registration shared secret, rate limits
// the test chooses), users registered through the shared-secret admin API,
// and a process that dies with its owner.
//
// The binary comes from the module in server/ (its own go.mod, so latch's
// go.mod and binary never depend on Dendrite). It is built once per machine
// into the user's cache folder, or taken prebuilt from $LATCH_TEST_DENDRITE
// (.ci/run builds it there).
package dendritetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Version is the Dendrite release server/go.mod pins; it keys the build cache.
const Version = "v0.13.8"

const (
	// EnvBinaries names a folder holding prebuilt dendrite, generate-config
	// and generate-keys binaries of Version. When set it must work: a test
	// fails rather than skips.
	EnvBinaries = "LATCH_TEST_DENDRITE"
	// EnvRequire, when set, makes a failed build fail the test instead of
	// skipping it.
	EnvRequire = "LATCH_REQUIRE_DENDRITE"
)

// Options shape one server.
type Options struct {
	// RateLimit turns on Dendrite's client API rate limiting: at most
	// Threshold requests per user before a CooloffMS pause. Off, nothing is
	// limited.
	RateLimit bool
	Threshold int
	CooloffMS int
}

// Server is one running Dendrite.
type Server struct {
	// URL is the client API's base URL, http://127.0.0.1:PORT.
	URL string
	// Name is the server name, the part after the colon of a user ID.
	Name string

	dir     string
	secret  string
	logPath string
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error
	stop    sync.Once
}

// Start runs a server that t's cleanup stops, with its files in t.TempDir().
// Without a usable binary it skips t (or fails it, see EnvBinaries and
// EnvRequire).
func Start(t testing.TB, opt Options) *Server {
	t.Helper()
	bin := Binaries(t)
	s, err := Launch(bin, t.TempDir(), opt)
	if err != nil {
		t.Fatalf("start dendrite: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("dendrite log (tail):\n%s", s.LogTail(60))
		}
		s.Close()
	})
	return s
}

// Launch starts Dendrite from the binaries in bin with its files in dir and
// waits until its client API answers. The caller owns the server and must
// Close it.
func Launch(bin, dir string, opt Options) (*Server, error) {
	var lastErr error
	// The port is picked free and then handed to Dendrite; another process
	// can take it in between, so a start that loses the race is retried.
	for attempt := 0; attempt < 3; attempt++ {
		s, err := launchOnce(bin, dir, opt)
		if err == nil {
			return s, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

func launchOnce(bin, dir string, opt Options) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	data, err := os.MkdirTemp(dir, "dendrite")
	if err != nil {
		return nil, err
	}
	secret := make([]byte, 24)
	if _, err := rand.Read(secret); err != nil {
		return nil, err
	}
	s := &Server{
		URL:     fmt.Sprintf("http://127.0.0.1:%d", port),
		Name:    fmt.Sprintf("localhost:%d", port),
		dir:     data,
		secret:  hex.EncodeToString(secret),
		logPath: filepath.Join(data, "dendrite.log"),
		exited:  make(chan struct{}),
	}
	configPath, err := s.writeConfig(bin, opt)
	if err != nil {
		return nil, err
	}
	logFile, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	s.cmd = exec.Command(filepath.Join(bin, "dendrite"),
		"-config", configPath, "-http-bind-address", fmt.Sprintf("127.0.0.1:%d", port))
	s.cmd.Dir = data
	s.cmd.Stdout, s.cmd.Stderr = logFile, logFile
	s.cmd.SysProcAttr = procAttr()
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("run dendrite: %w", err)
	}
	go func() {
		s.waitErr = s.cmd.Wait()
		close(s.exited)
	}()
	if err := s.waitReady(60 * time.Second); err != nil {
		s.Close()
		return nil, fmt.Errorf("%w\n%s", err, s.LogTail(20))
	}
	return s, nil
}

// Close kills the server's process group and waits for it.
func (s *Server) Close() {
	s.stop.Do(func() {
		if s.cmd.Process != nil {
			_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		}
		<-s.exited
	})
}

// Log is everything the server has logged so far.
func (s *Server) Log() string {
	b, _ := os.ReadFile(s.logPath)
	return string(b)
}

// LogTail is the last n lines of the server's log.
func (s *Server) LogTail(n int) string {
	lines := strings.Split(strings.TrimRight(s.Log(), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func (s *Server) waitReady(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	client := &http.Client{Timeout: 2 * time.Second}
	for time.Now().Before(deadline) {
		select {
		case <-s.exited:
			return fmt.Errorf("dendrite exited before answering: %v", s.waitErr)
		default:
		}
		resp, err := client.Get(s.URL + "/_matrix/client/versions")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-s.exited:
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("dendrite did not answer on %s within %v", s.URL, limit)
}

// writeConfig has generate-config write the default configuration for the
// pinned version and changes the few lines a test server needs. Each change
// must find its line: a Dendrite whose defaults moved fails here, loudly.
func (s *Server) writeConfig(bin string, opt Options) (string, error) {
	key := filepath.Join(s.dir, "matrix_key.pem")
	if out, err := exec.Command(filepath.Join(bin, "generate-keys"), "-private-key", key).CombinedOutput(); err != nil {
		return "", fmt.Errorf("generate-keys: %v: %s", err, out)
	}
	var stderr bytes.Buffer
	gen := exec.Command(filepath.Join(bin, "generate-config"), "-ci", "-dir", s.dir, "-server", s.Name)
	gen.Stderr = &stderr
	config, err := gen.Output()
	if err != nil {
		return "", fmt.Errorf("generate-config: %v: %s", err, stderr.String())
	}
	threshold, cooloff := opt.Threshold, opt.CooloffMS
	if threshold <= 0 {
		threshold = 5
	}
	if cooloff <= 0 {
		cooloff = 500
	}
	edits := [][2]string{
		{"  private_key: matrix_key.pem\n", "  private_key: " + key + "\n"},
		{"  disable_federation: false\n", "  disable_federation: true\n"},
		// Registration is by shared secret only; open registration would
		// also need -really-enable-open-registration.
		{"  registration_disabled: false\n", "  registration_disabled: true\n"},
		{"  registration_shared_secret: complement\n", "  registration_shared_secret: " + s.secret + "\n"},
		{"  rate_limiting:\n    enabled: false\n    threshold: 5\n    cooloff_ms: 500\n",
			fmt.Sprintf("  rate_limiting:\n    enabled: %t\n    threshold: %d\n    cooloff_ms: %d\n", opt.RateLimit, threshold, cooloff)},
		{"  level: trace\n", "  level: info\n"},
	}
	text := string(config)
	for _, e := range edits {
		if !strings.Contains(text, e[0]) {
			return "", fmt.Errorf("generate-config's output has no %q: has Dendrite's default configuration changed?", e[0])
		}
		text = strings.Replace(text, e[0], e[1], 1)
	}
	path := filepath.Join(s.dir, "dendrite.yaml")
	return path, os.WriteFile(path, []byte(text), 0o600)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// errNoBinaries means a build was not possible here (no go command, no C
// compiler, no module proxy): the test skips unless EnvRequire is set.
var errNoBinaries = errors.New("dendrite unavailable")

// binaries caches Binaries' answer for the test binary's life.
var binaries struct {
	once sync.Once
	dir  string
	err  error
}

// Binaries is the folder holding the dendrite, generate-config and
// generate-keys binaries: $LATCH_TEST_DENDRITE, or the cache folder, built
// there on first use. It skips t when that is impossible here (fails it in
// CI, see EnvBinaries and EnvRequire).
func Binaries(t testing.TB) string {
	t.Helper()
	binaries.once.Do(func() { binaries.dir, binaries.err = findOrBuild(context.Background()) })
	if binaries.err != nil {
		if errors.Is(binaries.err, errNoBinaries) && os.Getenv(EnvRequire) == "" && os.Getenv(EnvBinaries) == "" {
			t.Skipf("needs Dendrite %s (set %s to a folder of prebuilt binaries, or let the test build it: go and gcc): %v",
				Version, EnvBinaries, binaries.err)
		}
		t.Fatalf("dendrite binaries: %v", binaries.err)
	}
	return binaries.dir
}

var tools = []string{"dendrite", "generate-config", "generate-keys"}

func findOrBuild(ctx context.Context) (string, error) {
	if dir := os.Getenv(EnvBinaries); dir != "" {
		if err := haveAll(dir); err != nil {
			return "", fmt.Errorf("%s=%s: %w", EnvBinaries, dir, err)
		}
		return dir, nil
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("%w: no cache folder: %v", errNoBinaries, err)
	}
	dir := filepath.Join(cache, "latch-test", "dendrite-"+Version)
	if haveAll(dir) == nil {
		return dir, nil
	}
	if err := build(ctx, dir); err != nil {
		return "", err
	}
	return dir, haveAll(dir)
}

func haveAll(dir string) error {
	for _, name := range tools {
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.Mode()&0o111 == 0 {
			return fmt.Errorf("no executable %s in %s", name, dir)
		}
	}
	return nil
}

package dendritetest

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"
)

// User is an account on the server with one logged-in device.
type User struct {
	UserID      string
	AccessToken string
	DeviceID    string
	Password    string
}

// Register creates the account localpart with one device and fails t if
// the server refuses.
func (s *Server) Register(t testing.TB, localpart string) User {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	u, err := s.RegisterUser(ctx, localpart)
	if err != nil {
		t.Fatalf("register %s: %v", localpart, err)
	}
	return u
}

// RegisterUser creates the account localpart through the shared-secret
// admin registration API (/_synapse/admin/v1/register, which Dendrite
// serves): a nonce, then the HMAC-SHA1 of nonce, name, password and admin
// flag under the secret.
func (s *Server) RegisterUser(ctx context.Context, localpart string) (User, error) {
	var nonce struct {
		Nonce string `json:"nonce"`
	}
	if err := s.call(ctx, http.MethodGet, "/_synapse/admin/v1/register", nil, &nonce); err != nil {
		return User{}, fmt.Errorf("nonce: %w", err)
	}
	pw := make([]byte, 16)
	if _, err := rand.Read(pw); err != nil {
		return User{}, err
	}
	password := hex.EncodeToString(pw)
	mac := hmac.New(sha1.New, []byte(s.secret))
	for i, part := range []string{nonce.Nonce, localpart, password, "notadmin"} {
		if i > 0 {
			mac.Write([]byte{0})
		}
		mac.Write([]byte(part))
	}
	req := map[string]any{
		"nonce": nonce.Nonce, "username": localpart, "password": password,
		"admin": false, "mac": hex.EncodeToString(mac.Sum(nil)),
	}
	var resp struct {
		UserID      string `json:"user_id"`
		AccessToken string `json:"access_token"`
		DeviceID    string `json:"device_id"`
	}
	if err := s.call(ctx, http.MethodPost, "/_synapse/admin/v1/register", req, &resp); err != nil {
		return User{}, err
	}
	if resp.AccessToken == "" || resp.DeviceID == "" {
		return User{}, fmt.Errorf("registration of %s returned no access token or device", localpart)
	}
	return User{UserID: resp.UserID, AccessToken: resp.AccessToken, DeviceID: resp.DeviceID, Password: password}, nil
}

func (s *Server) call(ctx context.Context, method, path string, body, out any) error {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.URL+path, r)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, b)
	}
	return json.Unmarshal(b, out)
}

// NewDevice logs u in again with its password: the same account on a
// second device (a phone beside the desktop), with a token of its own.
func (s *Server) NewDevice(t testing.TB, u User) User {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := map[string]any{
		"type":       "m.login.password",
		"identifier": map[string]string{"type": "m.id.user", "user": u.UserID},
		"password":   u.Password,
	}
	var resp struct {
		UserID      string `json:"user_id"`
		AccessToken string `json:"access_token"`
		DeviceID    string `json:"device_id"`
	}
	if err := s.call(ctx, http.MethodPost, "/_matrix/client/v3/login", req, &resp); err != nil {
		t.Fatalf("log %s in on a new device: %v", u.UserID, err)
	}
	return User{UserID: resp.UserID, AccessToken: resp.AccessToken, DeviceID: resp.DeviceID, Password: u.Password}
}

package discord

import (
	"net/http"
	"testing"
	"time"

	"github.com/latchd/latch/gateways/internal/retry"
)

func TestRateLimitWait(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tt := range []struct {
		header string
		want   time.Duration
	}{
		{"", 0},
		{"3", 3 * time.Second},
		{"0.5", 500 * time.Millisecond},
		{"0", 0},
		{"-4", 0},
		{"NaN", 0},
		{"1e12", maxRetryAfter},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0},
		{"soon", 0},
	} {
		if got := parseRetryAfter(tt.header, now); got != tt.want {
			t.Errorf("parseRetryAfter(%q) = %v, want %v", tt.header, got, tt.want)
		}
	}

	for _, tt := range []struct {
		name     string
		err      APIError
		min, max time.Duration
	}{
		{"as asked", APIError{Status: 429, Message: "You are being rate limited.", RetryAfter: 1500 * time.Millisecond}, 1500 * time.Millisecond, 1500 * time.Millisecond},
		{"asked too long", APIError{Status: 429, RetryAfter: 24 * time.Hour}, maxRetryAfter, maxRetryAfter},
		{"Discord's, asking nothing", APIError{Status: 429, Message: "You are being rate limited."}, minRetryAfter, minRetryAfter},
		{"a proxy's, saying nothing", APIError{Status: 429}, minBlindWait, 2 * minBlindWait},
	} {
		bo := retry.Backoff{Min: 10 * time.Millisecond, Max: 100 * time.Millisecond}
		if got := rateLimitWait(&tt.err, &bo); got < tt.min || got > tt.max {
			t.Errorf("%s: wait %v, want within [%v, %v]", tt.name, got, tt.min, tt.max)
		}
	}
}

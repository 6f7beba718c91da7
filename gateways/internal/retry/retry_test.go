package retry

import (
	"context"
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	b := Backoff{Min: time.Second, Max: time.Minute}
	prev := time.Duration(0)
	for i := range 12 {
		d := b.Next()
		if d < time.Second || d > time.Minute {
			t.Fatalf("wait %d = %v, want within [1s, 60s]", i, d)
		}
		if i < 5 && d < prev {
			t.Errorf("wait %d = %v shrank from %v", i, d, prev)
		}
		prev = d
	}
	if prev != time.Minute {
		t.Errorf("after 12 failures the wait is %v, want the 60s cap", prev)
	}
	b.Reset()
	if d := b.Next(); d < time.Second || d > 1500*time.Millisecond {
		t.Errorf("first wait after reset = %v, want 1s to 1.5s", d)
	}
}

func TestLimits(t *testing.T) {
	tests := []struct{ min, max, wantMin, wantMax time.Duration }{
		{0, 0, time.Second, time.Minute},
		{-1, -1, time.Second, time.Minute},
		{10 * time.Millisecond, 100 * time.Millisecond, 10 * time.Millisecond, 100 * time.Millisecond},
		{2 * time.Minute, 0, 2 * time.Minute, 2 * time.Minute},
		{5 * time.Second, time.Second, 5 * time.Second, 5 * time.Second},
	}
	for _, tt := range tests {
		if gotMin, gotMax := Limits(tt.min, tt.max); gotMin != tt.wantMin || gotMax != tt.wantMax {
			t.Errorf("Limits(%v, %v) = %v, %v; want %v, %v", tt.min, tt.max, gotMin, gotMax, tt.wantMin, tt.wantMax)
		}
	}
}

func TestSleep(t *testing.T) {
	if !Sleep(t.Context(), time.Millisecond) {
		t.Error("Sleep with a live context did not wait the full time")
	}
	if !Sleep(t.Context(), 0) {
		t.Error("Sleep(0) with a live context reported an early end")
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if Sleep(ctx, time.Hour) {
		t.Error("Sleep with an ended context reported waiting an hour")
	}
	if Sleep(ctx, 0) {
		t.Error("Sleep(0) with an ended context reported success")
	}
}

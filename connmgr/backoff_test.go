package connmgr

import (
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	c := DefaultConfig().Backoff
	for _, tc := range []struct {
		failures int
		u        float64
		want     time.Duration
	}{
		{0, 0.5, 0},
		{-3, 0.5, 0},
		{1, 0.5, time.Second},
		{2, 0.5, 2 * time.Second},
		{3, 0.5, 4 * time.Second},
		{9, 0.5, 256 * time.Second},
		{10, 0.5, 5 * time.Minute}, // 512 s capped
		{1 << 20, 0.5, 5 * time.Minute},
		{1, 0, 800 * time.Millisecond},  // -20%
		{1, 1, 1200 * time.Millisecond}, // +20%
		{10, 0, 4 * time.Minute},
		{10, 1, 6 * time.Minute},
		{3, 0.25, 3600 * time.Millisecond},
		{2, 7, 2400 * time.Millisecond}, // u clamped to 1
	} {
		if got := Backoff(tc.failures, c, tc.u); got != tc.want {
			t.Errorf("Backoff(%d, u=%v) = %v, want %v", tc.failures, tc.u, got, tc.want)
		}
	}
	kept := DefaultConfig().KeptBackoff
	if got := Backoff(6, kept, 0.5); got != 30*time.Second {
		t.Errorf("kept Backoff(6) = %v, want 30s (Max)", got)
	}
	noJitter := BackoffConfig{Base: time.Second, Max: time.Minute, Factor: 3}
	if got := Backoff(3, noJitter, 0.99); got != 9*time.Second {
		t.Errorf("Factor 3, no jitter: Backoff(3) = %v, want 9s", got)
	}
}

// TestBackoffMonotone: before jitter, the wait never shrinks as failures grow, and never
// exceeds Max (with jitter: (1+Jitter)*Max).
func TestBackoffMonotone(t *testing.T) {
	c := DefaultConfig().Backoff
	prev := time.Duration(0)
	for n := 1; n < 200; n++ {
		d := Backoff(n, c, 0.5)
		if d < prev || d > c.Max {
			t.Fatalf("Backoff(%d) = %v after %v (Max %v)", n, d, prev, c.Max)
		}
		if hi := Backoff(n, c, 1); hi > time.Duration(float64(c.Max)*1.2) {
			t.Fatalf("Backoff(%d, u=1) = %v beyond 1.2*Max", n, hi)
		}
		prev = d
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []Config{
		{Target: -1},
		{MaxDialing: -2},
		{MaxPerGroup: -2},
		{Backoff: BackoffConfig{Base: time.Minute, Max: time.Second}},
		{KeptBackoff: BackoffConfig{Factor: 0.5}},
		{Backoff: BackoffConfig{Jitter: 1.5}},
		{Interval: -time.Second},
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v: Validate accepted it", c)
		}
	}
	for _, c := range []Config{{}, {MaxPerGroup: -1}, {Backoff: BackoffConfig{Jitter: -1}}} {
		if err := c.Validate(); err != nil {
			t.Errorf("%+v: %v", c, err)
		}
	}
	if got := (Config{Backoff: BackoffConfig{Jitter: -1}}).withDefaults().Backoff.Jitter; got != 0 {
		t.Errorf("Jitter -1 became %v, want 0", got)
	}
}

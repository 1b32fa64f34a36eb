package mux

import (
	"errors"
	"testing"
	"time"
)

// TestUselessMeter: a burst of ten seconds' worth passes, and after it the average rate;
// one frame more than that is an error, and time makes room again.
func TestUselessMeter(t *testing.T) {
	m := newUselessMeter(100)
	now := time.Unix(1000, 0)
	for i := range 1000 {
		if err := m.add(now, "x"); err != nil {
			t.Fatalf("frame %d of a burst of 1000: %v", i, err)
		}
	}
	if err := m.add(now, "x"); !errors.Is(err, ErrPeerMisbehaving) {
		t.Fatalf("frame 1001 at once = %v, want ErrPeerMisbehaving", err)
	}
	now = now.Add(time.Second)
	for i := range 99 {
		if err := m.add(now, "x"); err != nil {
			t.Fatalf("frame %d a second later: %v", i, err)
		}
	}
	// Steady at the allowed rate, for as long as it goes on.
	for i := range 10_000 {
		now = now.Add(10 * time.Millisecond)
		if err := m.add(now, "x"); err != nil {
			t.Fatalf("frame %d at 100/s: %v", i, err)
		}
	}
	if err := m.add(now, "x"); err == nil {
		// due is as far ahead as the burst allows, and another frame at the same instant
		// passes it.
		if err := m.add(now, "x"); err == nil {
			t.Fatal("frames above the rate after a full burst passed")
		}
	}
	off := newUselessMeter(-1)
	for range 100_000 {
		if err := off.add(now, "x"); err != nil {
			t.Fatal("a disabled meter refused a frame")
		}
	}
}

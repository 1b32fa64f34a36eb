package portmap_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tendril-p2p/tendril/portmap"
)

// A gateway that answers every request with a flood of packets that are not the answer
// (wrong opcode, short, oversized) costs a bounded number of reads per request.
func TestNATPMPGarbageFloodBounded(t *testing.T) {
	f := newFakePMP(t)
	f.set(func(f *fakePMP) {
		f.hostile = func(req []byte) [][]byte {
			var out [][]byte
			for i := range 200 {
				switch i % 3 {
				case 0:
					out = append(out, []byte{0, 0x80 | 7, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8})
				case 1:
					out = append(out, []byte{0})
				default:
					out = append(out, make([]byte, 60))
				}
			}
			return out
		}
	})
	cfg := natpmpConfig(f)
	cfg.RequestTimeout = 5 * time.Second
	h := startMapper(t, cfg)
	start := time.Now()
	h.clk.nextWait(t)
	if err := h.m.Err(); !errors.Is(err, portmap.ErrBadResponse) {
		t.Fatalf("Err() = %v, want ErrBadResponse", err)
	}
	// It gave up on the flood, not on the 5 s timeout.
	if el := time.Since(start); el > 4*time.Second {
		t.Fatalf("took %v", el)
	}
	f.mu.Lock()
	asks := f.extAsks
	f.mu.Unlock()
	if asks != 1 {
		t.Fatalf("sent %d requests into the flood, want 1", asks)
	}
	h.noChange()
}

// Answers of the right shape but wrong content: a PCP server's version 2, a zero port,
// an answer about another internal port.
func TestNATPMPBadAnswers(t *testing.T) {
	for name, tc := range map[string]struct {
		mutate func(out []byte)
		want   error
	}{
		"pcp version":   {func(out []byte) { out[0] = 2 }, portmap.ErrBadResponse},
		"zero port":     {func(out []byte) { out[10], out[11] = 0, 0 }, portmap.ErrBadResponse},
		"zero lifetime": {func(out []byte) { copy(out[12:], []byte{0, 0, 0, 0}) }, portmap.ErrBadResponse},
		"other port":    {func(out []byte) { out[8], out[9] = 0, 1 }, portmap.ErrTimeout},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFakePMP(t)
			f.set(func(f *fakePMP) { f.mutate = tc.mutate })
			cfg := natpmpConfig(f)
			cfg.RequestTimeout = 300 * time.Millisecond
			h := startMapper(t, cfg)
			h.clk.nextWait(t)
			if err := h.m.Err(); !errors.Is(err, tc.want) {
				t.Fatalf("Err() = %v, want %v", err, tc.want)
			}
			h.noChange()
		})
	}
}

// A gateway that never answers: Close returns at once, interrupting the request in
// flight, and no goroutine is left (goleak checks at exit).
func TestNATPMPSilentGatewayClosePrompt(t *testing.T) {
	f := newFakePMP(t)
	f.set(func(f *fakePMP) { f.silent = true })
	cfg := natpmpConfig(f)
	cfg.RequestTimeout = time.Minute
	h := startMapper(t, cfg)
	for {
		f.mu.Lock()
		n := f.extAsks
		f.mu.Unlock()
		if n >= 3 { // retransmitting at 1 s intervals by now
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	start := time.Now()
	if err := h.m.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > 300*time.Millisecond {
		t.Fatalf("Close took %v with a request in flight", el)
	}
	h.noChange()
}

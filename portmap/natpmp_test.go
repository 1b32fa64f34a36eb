package portmap_test

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/tendril-p2p/tendril/portmap"
)

var loopback = netip.MustParseAddr("127.0.0.1")

// harness runs a Mapper against a fake gateway on a fake clock and collects its reports.
type harness struct {
	t       *testing.T
	m       *portmap.Mapper
	clk     *fakeClock
	changes chan portmap.Mapping
}

func startMapper(t *testing.T, cfg portmap.Config) *harness {
	t.Helper()
	h := &harness{t: t, clk: newFakeClock(), changes: make(chan portmap.Mapping, 16)}
	if cfg.InternalPort == 0 {
		cfg.InternalPort = 4001
	}
	cfg.Clock = h.clk
	cfg.OnChange = func(mp portmap.Mapping) { h.changes <- mp }
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = 2 * time.Second
	}
	m, err := portmap.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.m = m
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	return h
}

func (h *harness) change() portmap.Mapping {
	h.t.Helper()
	select {
	case mp := <-h.changes:
		return mp
	case <-time.After(10 * time.Second):
		h.t.Fatal("no OnChange")
		return portmap.Mapping{}
	}
}

func (h *harness) noChange() {
	h.t.Helper()
	select {
	case mp := <-h.changes:
		h.t.Fatalf("unexpected OnChange(%v)", mp)
	default:
	}
}

func natpmpConfig(f *fakePMP) portmap.Config {
	return portmap.Config{Gateway: loopback, NATPMPPort: f.port(), Methods: []portmap.Method{portmap.NATPMP}}
}

func TestNATPMPMapRenewRemove(t *testing.T) {
	f := newFakePMP(t)
	h := startMapper(t, natpmpConfig(f))
	start := h.clk.Now()
	mp := h.change()
	want := netip.MustParseAddrPort("203.0.113.7:4001")
	if mp.External != want || mp.Method != portmap.NATPMP || mp.Protocol != "tcp" || mp.InternalPort != 4001 || mp.Gateway != loopback || mp.DoubleNAT {
		t.Fatalf("mapping %+v", mp)
	}
	if !mp.Expires.Equal(start.Add(7200 * time.Second)) {
		t.Fatalf("expires %v, want the recommended 7200 s lease", mp.Expires.Sub(start))
	}
	if w := h.clk.nextWait(t); w != 3600*time.Second {
		t.Fatalf("renewal after %v, want half the lease", w)
	}
	h.clk.Advance(3600 * time.Second)
	if w := h.clk.nextWait(t); w != 3600*time.Second {
		t.Fatalf("second renewal after %v", w)
	}
	h.noChange() // a renewal that changes nothing is not reported
	if cur := h.m.Current(); !cur.Expires.Equal(start.Add(3600*time.Second + 7200*time.Second)) {
		t.Fatalf("renewed expiry %v", cur.Expires.Sub(start))
	}
	if err := h.m.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if mp := h.change(); !mp.IsZero() {
		t.Fatalf("Close reported %v, want the zero Mapping", mp)
	}
	log := f.log()
	if len(log) != 3 {
		t.Fatalf("gateway saw %d mapping requests, want map, renew, delete: %+v", len(log), log)
	}
	if r := log[1]; r.op != 2 || r.internal != 4001 || r.suggested != 4001 || r.lifetime != 7200 {
		t.Fatalf("renewal %+v", r)
	}
	if r := log[2]; r.internal != 4001 || r.suggested != 0 || r.lifetime != 0 {
		t.Fatalf("delete %+v", r)
	}
}

func TestNATPMPAssignedPortKept(t *testing.T) {
	f := newFakePMP(t)
	f.set(func(f *fakePMP) { f.assign = func(uint16) uint16 { return 40123 } })
	h := startMapper(t, natpmpConfig(f))
	if mp := h.change(); mp.External.Port() != 40123 {
		t.Fatalf("mapping %v, want the port the gateway assigned", mp)
	}
	h.clk.Advance(h.clk.nextWait(t))
	h.clk.nextWait(t)
	if log := f.log(); log[1].suggested != 40123 {
		t.Fatalf("renewal asked for %d, want the assigned port", log[1].suggested)
	}
}

func TestNATPMPExternalAddressChange(t *testing.T) {
	f := newFakePMP(t)
	h := startMapper(t, natpmpConfig(f))
	h.change()
	f.set(func(f *fakePMP) { f.ext = [4]byte{198, 51, 100, 9} })
	h.clk.Advance(h.clk.nextWait(t))
	if mp := h.change(); mp.External != netip.MustParseAddrPort("198.51.100.9:4001") {
		t.Fatalf("after the address change: %v", mp)
	}
}

func TestNATPMPShortLeaseRenewsNoSoonerThanMinRenew(t *testing.T) {
	f := newFakePMP(t)
	f.set(func(f *fakePMP) { f.grant = func(uint32) uint32 { return 2 } })
	h := startMapper(t, natpmpConfig(f))
	h.change()
	if w := h.clk.nextWait(t); w != portmap.DefaultMinRenew {
		t.Fatalf("a 2 s lease renews after %v, want MinRenew", w)
	}
}

func TestNATPMPFailureBackoffLossRecovery(t *testing.T) {
	f := newFakePMP(t)
	cfg := natpmpConfig(f)
	cfg.Lease = 120 * time.Second
	cfg.RequestTimeout = 300 * time.Millisecond
	h := startMapper(t, cfg)
	mp := h.change()
	// Silent before the clock moves: the renewal it starts must find the gateway so.
	f.set(func(f *fakePMP) { f.silent = true })
	h.clk.Advance(h.clk.nextWait(t)) // 60 s: the renewal, which the gateway ignores
	var waits []time.Duration
	for {
		w := h.clk.nextWait(t)
		if !errors.Is(h.m.Err(), portmap.ErrTimeout) {
			t.Fatalf("Err() = %v, want ErrTimeout", h.m.Err())
		}
		waits = append(waits, w)
		lost := false
		select {
		case got := <-h.changes:
			if !got.IsZero() {
				t.Fatalf("OnChange(%v) while failing", got)
			}
			if h.clk.Now().Before(mp.Expires) {
				t.Fatalf("loss reported %v before the lease ran out", mp.Expires.Sub(h.clk.Now()))
			}
			lost = true
		default:
			if !h.clk.Now().Before(mp.Expires) {
				t.Fatal("lease ran out and no loss was reported")
			}
		}
		if lost {
			break
		}
		h.clk.Advance(w)
		if len(waits) > 20 {
			t.Fatalf("no loss after %v", waits)
		}
	}
	// Backoff: 2 s then doubling, ±20%, cut at the lease's end.
	if w := waits[0]; w < 1600*time.Millisecond || w > 2400*time.Millisecond {
		t.Fatalf("first retry after %v", w)
	}
	if w := waits[1]; w < 3200*time.Millisecond || w > 4800*time.Millisecond {
		t.Fatalf("second retry after %v", w)
	}
	if !h.m.Current().IsZero() {
		t.Fatal("Current still holds the lost mapping")
	}
	// The gateway comes back: mapped again.
	f.set(func(f *fakePMP) { f.silent = false })
	h.clk.Advance(waits[len(waits)-1])
	if got := h.change(); got.External != mp.External {
		t.Fatalf("recovered %v", got)
	}
	if h.m.Err() != nil {
		t.Fatalf("Err() = %v after success", h.m.Err())
	}
}

func TestNATPMPRefused(t *testing.T) {
	f := newFakePMP(t)
	f.set(func(f *fakePMP) { f.code = 2 })
	h := startMapper(t, natpmpConfig(f))
	h.clk.nextWait(t)
	var ge *portmap.GatewayError
	if err := h.m.Err(); !errors.Is(err, portmap.ErrRefused) || !errors.As(err, &ge) || ge.Code != 2 || ge.Method != portmap.NATPMP {
		t.Fatalf("Err() = %v", err)
	}
	h.noChange()
}

func TestNATPMPExternalAddressVetted(t *testing.T) {
	for _, tc := range []struct {
		ext      [4]byte
		bad, dbl bool
	}{
		{ext: [4]byte{0, 0, 0, 0}, bad: true},
		{ext: [4]byte{127, 0, 0, 1}, bad: true},
		{ext: [4]byte{255, 255, 255, 255}, bad: true},
		{ext: [4]byte{224, 0, 0, 1}, bad: true},
		{ext: [4]byte{169, 254, 1, 1}, bad: true},
		{ext: [4]byte{192, 168, 1, 20}, dbl: true},
		{ext: [4]byte{10, 1, 2, 3}, dbl: true},
		{ext: [4]byte{100, 64, 7, 7}, dbl: true},
		{ext: [4]byte{100, 128, 7, 7}},
	} {
		f := newFakePMP(t)
		f.set(func(f *fakePMP) { f.ext = tc.ext })
		h := startMapper(t, natpmpConfig(f))
		if tc.bad {
			h.clk.nextWait(t)
			if err := h.m.Err(); !errors.Is(err, portmap.ErrBadExternalAddr) {
				t.Fatalf("%v: Err() = %v", tc.ext, err)
			}
			h.noChange()
			// The useless mapping was taken down again.
			if log := f.log(); len(log) != 2 || log[1].lifetime != 0 {
				t.Fatalf("%v: gateway saw %+v, want the mapping and its deletion", tc.ext, log)
			}
			continue
		}
		if mp := h.change(); mp.DoubleNAT != tc.dbl {
			t.Fatalf("%v: DoubleNAT = %v", tc.ext, mp.DoubleNAT)
		}
	}
}

package portmap

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"sync"
	"time"
)

// Mapper keeps one port mapped on the gateway: it discovers the gateway, maps the port,
// renews the lease, reports the external address through Config.OnChange, and removes
// the mapping on Close. Create it with New, run it with Start, stop it with Close.
type Mapper struct {
	cfg Config
	log *slog.Logger

	// mu guards the fields below it.
	mu      sync.Mutex
	state   mapperState
	cur     Mapping // what was last reported
	held    backend // the backend that holds cur (nil: none)
	lastErr error
	cancel  context.CancelFunc // ends run's context

	wg sync.WaitGroup
}

// mapperState is a Mapper's life: new, then running, then closed (from either).
type mapperState uint8

const (
	stateNew mapperState = iota
	stateRunning
	stateClosed
)

// backend is one method's client for one gateway.
type backend interface {
	method() Method
	gateway() netip.Addr
	// add makes or renews the mapping, asking for prev (0: the internal port), and
	// returns the external address and port and the lease granted (0: permanent).
	add(ctx context.Context, prev uint16) (netip.AddrPort, time.Duration, error)
	// remove deletes the mapping of external port ext.
	remove(ctx context.Context, ext uint16) error
}

// New validates cfg and returns a Mapper that has not started.
func New(cfg Config) (*Mapper, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := cfg.withDefaults()
	return &Mapper{cfg: c, log: c.Logger.With("port", c.InternalPort, "proto", c.Protocol)}, nil
}

// Start begins mapping in the background and returns at once: the first attempt starts
// now, later ones follow the renewal and backoff schedule. The Mapper runs until Close or
// until ctx is done (Close must still be called, to remove the mapping and wait).
func (m *Mapper) Start(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch m.state {
	case stateClosed:
		return ErrClosed
	case stateRunning:
		return ErrStarted
	}
	m.state = stateRunning
	ctx, m.cancel = context.WithCancel(ctx)
	m.wg.Go(func() { m.run(ctx) })
	return nil
}

// Current returns the mapping held now (the zero Mapping if none), with its current
// expiry.
func (m *Mapper) Current() Mapping {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cur
}

// Err returns why the last attempt failed, or nil if it succeeded or none was made yet.
// While a mapping is held its renewal may be failing: Current still reports it until its
// lease runs out.
func (m *Mapper) Err() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lastErr
}

// Close stops the Mapper, waits for its goroutine, and deletes the mapping from the
// gateway within ctx; it then reports the zero Mapping to OnChange. It returns the
// deletion's error, if any. It is idempotent and must not be called from OnChange.
func (m *Mapper) Close(ctx context.Context) error {
	m.mu.Lock()
	if m.state == stateClosed {
		m.mu.Unlock()
		return nil
	}
	m.state = stateClosed
	if m.cancel != nil {
		m.cancel()
	}
	m.mu.Unlock()
	m.wg.Wait()

	m.mu.Lock()
	cur, held := m.cur, m.held
	m.cur, m.held = Mapping{}, nil
	m.mu.Unlock()
	if cur.IsZero() {
		return nil
	}
	err := held.remove(ctx, cur.External.Port())
	if err != nil {
		m.log.Warn("portmap: removing the mapping failed", "mapping", cur.String(), "err", err)
		err = fmt.Errorf("portmap: removing %s: %w", cur, err)
	} else {
		m.log.Info("portmap: mapping removed", "mapping", cur.String())
	}
	m.report(Mapping{})
	return err
}

func (m *Mapper) report(mp Mapping) {
	if m.cfg.OnChange != nil {
		m.cfg.OnChange(mp)
	}
}

// run is the Mapper's loop: an attempt (a renewal of the mapping held, else a fresh
// mapping through the methods in order), then a wait: half the lease after a success,
// the backoff after a failure.
func (m *Mapper) run(ctx context.Context) {
	clock := m.cfg.Clock
	failures := 0
	var (
		held     backend
		cur      Mapping
		deadline time.Time // when cur is lost if not renewed
	)
	for {
		b, mp, granted, err := m.attempt(ctx, held, cur)
		if ctx.Err() != nil {
			m.keep(cur, held, nil) // the mapping stays for Close to remove
			return
		}
		now := clock.Now()
		var wait time.Duration
		if err == nil {
			failures = 0
			asked := m.cfg.lease(b.method())
			mp.Expires = time.Time{}
			if granted > 0 {
				mp.Expires = now.Add(granted)
				deadline = mp.Expires
			} else {
				deadline = now.Add(asked)
			}
			changed := !sameEndpoint(mp, cur)
			held, cur = b, mp
			m.keep(cur, held, nil)
			if changed {
				m.log.Info("portmap: mapped", "mapping", cur.String(), "lease", granted)
				m.report(cur)
			}
			wait = renewAfter(granted, asked, m.cfg.MinRenew)
		} else {
			failures++
			m.log.Debug("portmap: attempt failed", "failures", failures, "err", err)
			if held != nil && !transient(err) {
				// The gateway answered and said no, or answered nonsense: find a gateway
				// and method afresh next time, but keep reporting the mapping until its
				// lease runs out.
				held = nil
			}
			if !cur.IsZero() && !now.Before(deadline) {
				m.log.Info("portmap: mapping lost", "mapping", cur.String(), "err", err)
				cur, held = Mapping{}, nil
				m.keep(cur, held, err)
				m.report(cur)
			} else {
				m.keep(cur, held, err)
			}
			wait = retryAfter(failures, m.cfg.RetryBase, m.cfg.RetryMax, rand.Float64())
			if !cur.IsZero() {
				wait = failedWait(wait, now, deadline)
			}
		}
		t := clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}

// keep publishes the loop's state for Current, Err and Close.
func (m *Mapper) keep(cur Mapping, held backend, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cur, m.held, m.lastErr = cur, held, err
}

// transient reports whether an error says nothing about the gateway's will: it did not
// answer in time, or could not be reached. The same gateway is asked again.
func transient(err error) bool {
	return errors.Is(err, ErrTimeout) || errors.Is(err, ErrUnreachable)
}

// attempt renews cur on held, or, with no backend held, maps through each method in
// order until one succeeds. The external address is vetted here, for every method.
func (m *Mapper) attempt(ctx context.Context, held backend, cur Mapping) (backend, Mapping, time.Duration, error) {
	if held != nil {
		mp, granted, err := m.addOn(ctx, held, cur.External.Port())
		return held, mp, granted, err
	}
	var errs []error
	for _, method := range m.cfg.Methods {
		b, err := m.discover(ctx, method)
		if err == nil {
			var mp Mapping
			var granted time.Duration
			if mp, granted, err = m.addOn(ctx, b, 0); err == nil {
				return b, mp, granted, nil
			}
		}
		if ctx.Err() != nil {
			return nil, Mapping{}, 0, ctx.Err()
		}
		errs = append(errs, fmt.Errorf("%s: %w", method, err))
	}
	return nil, Mapping{}, 0, errors.Join(errs...)
}

func (m *Mapper) addOn(ctx context.Context, b backend, prev uint16) (Mapping, time.Duration, error) {
	ext, granted, err := b.add(ctx, prev)
	if err != nil {
		return Mapping{}, 0, err
	}
	mp := Mapping{Method: b.method(), Protocol: m.cfg.Protocol, InternalPort: m.cfg.InternalPort,
		External: netip.AddrPortFrom(ext.Addr().Unmap(), ext.Port()), Gateway: b.gateway()}
	dbl, err := checkExternal(mp.External.Addr())
	if err != nil {
		// The mapping was made but points nowhere useful: take it down again (bounded by
		// the same context) rather than leave it in the router's table.
		if rerr := b.remove(ctx, ext.Port()); rerr != nil {
			m.log.Debug("portmap: removing an unusable mapping failed", "err", rerr)
		}
		return Mapping{}, 0, err
	}
	mp.DoubleNAT = dbl
	return mp, granted, nil
}

// discover finds the gateway for method and returns a backend on it.
func (m *Mapper) discover(ctx context.Context, method Method) (backend, error) {
	gw := m.cfg.Gateway
	switch method {
	case NATPMP:
		if !gw.IsValid() {
			var err error
			if gw, err = defaultGateway(); err != nil {
				return nil, err
			}
		}
		return &natpmpBackend{
			c:     natpmpClient{gw: netip.AddrPortFrom(gw, uint16(m.cfg.NATPMPPort)), timeout: m.cfg.RequestTimeout},
			proto: m.cfg.Protocol, internal: uint16(m.cfg.InternalPort), lease: m.cfg.lease(NATPMP),
		}, nil
	case UPnP:
		return m.discoverUPnP(ctx, gw)
	}
	return nil, fmt.Errorf("%w: method %s", ErrInvalidConfig, method)
}

func (m *Mapper) discoverUPnP(ctx context.Context, gw netip.Addr) (backend, error) {
	if m.cfg.UPnPRootURL != "" {
		loc, host, err := parseRootURL(m.cfg.UPnPRootURL) // checked by Validate
		if err != nil {
			return nil, fmt.Errorf("%w: UPnPRootURL: %v", ErrInvalidConfig, err)
		}
		return upnpFromURL(ctx, &m.cfg, loc, host)
	}
	if !gw.IsValid() {
		gw, _ = defaultGateway() // unknown off Linux: then any device on a local subnet
	}
	accept := onLink
	if gw.IsValid() {
		accept = func(a netip.Addr) bool { return a == gw }
	}
	found, err := ssdpSearch(ctx, ssdpGroup, m.cfg.DiscoveryTimeout, accept, gw)
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, c := range found {
		b, err := upnpFromURL(ctx, &m.cfg, c.loc, c.host)
		if err == nil {
			return b, nil
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return nil, fmt.Errorf("%w: no UPnP gateway answered", ErrNoGateway)
	}
	return nil, errors.Join(errs...)
}

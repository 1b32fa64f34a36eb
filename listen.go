package tendril

// Listening: binding, the accept loop, and what it does with each connection before the
// handshake (gater, admission).

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/tendril-p2p/tendril/internal/admit"
	"github.com/tendril-p2p/tendril/secio"
	"github.com/tendril-p2p/tendril/transport"
)

// Listen starts accepting connections on addr (port 0 picks a free port) and returns the
// bound address, with /p2p/ and this node's peer ID. The transport is the first of
// Config.Transports that handles addr: /ip4/127.0.0.1/tcp/0, /ip4/0.0.0.0/tcp/0/ws,
// /memory/0 with a memory transport... A Service listens on as many addresses as it is
// given, of any transports, at once. ctx bounds only the bind; the listener runs until
// Close.
func (s *Service) Listen(ctx context.Context, addr Addr) (Addr, error) {
	return s.listen(ctx, addr, false)
}

// ListenLegacy is Listen for the insecure TEA legacy mode (Config.LegacyTEA must be set).
// Connections accepted there speak only that mode; the returned address has no peer ID.
func (s *Service) ListenLegacy(ctx context.Context, addr Addr) (Addr, error) {
	if s.cfg.LegacyTEA == nil {
		return Addr{}, ErrLegacyDisabled
	}
	return s.listen(ctx, addr, true)
}

func (s *Service) listen(ctx context.Context, addr Addr, legacy bool) (Addr, error) {
	t, err := s.transportFor(addr)
	if err != nil {
		return Addr{}, err
	}
	ln, err := t.Listen(ctx, addr.Transport, transport.ListenOptions{TrustedProxies: s.cfg.TrustedProxies})
	if err != nil {
		return Addr{}, fmt.Errorf("tendril: listen %s: %w", addr.Transport, err)
	}
	return s.serveListener(ln, legacy)
}

// AddListener runs the Service on a listener the caller made (a transport's, or one of
// its own: a WebSocket handler mounted on the application's HTTP server, say) and returns
// its address with this node's peer ID. Its connections are admitted, upgraded and
// handshaken as Listen's are; Close closes it.
func (s *Service) AddListener(ln transport.Listener) (Addr, error) {
	return s.serveListener(ln, false)
}

// transportFor returns the transport that handles addr.
func (s *Service) transportFor(addr Addr) (transport.Transport, error) {
	t := transport.For(s.transports, addr.Transport)
	if t == nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrInvalidAddr, addr.Transport, transport.ErrUnsupported)
	}
	return t, nil
}

func (s *Service) serveListener(ln transport.Listener, legacy bool) (Addr, error) {
	l := &listener{ln: ln, legacy: legacy, addr: Addr{Transport: ln.Multiaddr()}}
	if !legacy {
		l.addr.Peer = s.id
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ln.Close()
		return Addr{}, ErrServiceClosed
	}
	s.listeners[l] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	s.log.Info("listening", "addr", l.addr, "legacy", legacy)
	s.emit(Event{Type: EventListenStarted, Addr: l.addr, Secure: !legacy})
	go s.acceptLoop(l)
	return l.addr, nil
}

// Addrs returns the addresses this node listens on.
func (s *Service) Addrs() []Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Addr, 0, len(s.listeners))
	for l := range s.listeners {
		out = append(out, l.addr)
	}
	return out
}

func (s *Service) acceptLoop(l *listener) {
	defer s.wg.Done()
	var delay time.Duration
	// Where the loop looks, without reading, for a dialer's first handshake message.
	peek := make([]byte, 4+secio.MaxHandshakeMessage)
	for {
		c, err := l.ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && s.ctx.Err() == nil {
				// Out of descriptors and the like: back off rather than spin or give up.
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				time.Sleep(delay)
				continue
			}
			s.mu.Lock()
			delete(s.listeners, l)
			closed := s.closed
			s.mu.Unlock()
			if closed {
				err = nil
			}
			s.emit(Event{Type: EventListenClosed, Addr: l.addr, Err: err})
			return
		}
		delay = 0
		// A dialer speaks first and at once: a connection whose first message has
		// arrived by now has spoken, and no burst of silent newcomers evicts it.
		spoke := !l.legacy && firstMessageIn(c, peek)
		hctx, ad, err := s.admitConn(s.ctx, c, spoke)
		if err != nil {
			continue
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			_, _ = s.serveInbound(hctx, l.ln, c, ad, l.legacy)
		}()
	}
}

// admitConn gates and admits an inbound connection by its remote address, before
// anything is read from it; on refusal it resets c and reports it.
func (s *Service) admitConn(ctx context.Context, c net.Conn, spoke bool) (context.Context, admitted, error) {
	remote := transport.RemoteAddrPort(c)
	if err := s.gateAddr(Inbound, remote); err != nil {
		abortConn(c)
		s.emitRepeat(Event{Type: EventGated, Addr: Addr{Transport: transport.RemoteMultiaddr(c)}, Direction: Inbound, Err: err}, remote.Addr())
		return nil, admitted{}, err
	}
	hctx, ad, err := s.admitInbound(ctx, remote, spoke)
	if err != nil {
		abortConn(c)
		if errors.Is(err, ErrConnectionLimit) {
			s.emitRepeat(Event{Type: EventLimitReached, Addr: Addr{Transport: transport.RemoteMultiaddr(c)}, Direction: Inbound, Err: err}, remote.Addr())
		}
		return nil, admitted{}, err
	}
	return hctx, ad, nil
}

// serveInbound upgrades an admitted connection (ln's Upgrade: a trusted proxy's header,
// the WebSocket upgrade; nil ln: nothing to do), moves its admission to the client's
// address if a trusted proxy named another, and runs setup; all within the handshake's
// bound. It gives back what ad holds on every path where no session comes of it.
func (s *Service) serveInbound(ctx context.Context, ln transport.Listener, c net.Conn, ad admitted, legacy bool) (*Session, error) {
	// The Service's own bound on an inbound handshake, whatever secio's timers do: a
	// little after HandshakeTimeout, so that secio's typed timeout normally comes first.
	ctx, cancel := context.WithTimeoutCause(ctx, s.cfg.HandshakeTimeout+handshakeSlack, secio.ErrHandshakeTimeout)
	defer cancel()
	if ln != nil {
		accepted := transport.RemoteAddrPort(c)
		up, err := ln.Upgrade(ctx, c)
		if err == nil {
			if client := transport.RemoteAddrPort(up); client.Addr() != accepted.Addr() {
				err = s.readdress(&ad, client)
			}
		}
		if err != nil {
			s.release(&ad)
			abortConn(c)
			s.inboundFailed(Addr{Transport: transport.RemoteMultiaddr(c)}, ad.ip(), legacy, err)
			return nil, err
		}
		c = up
	}
	return s.setup(ctx, c, ad, Addr{}, legacy)
}

// readdress moves an inbound connection's admission from a trusted proxy's address to the
// client's it named, gating and counting that one as if the client had connected itself.
func (s *Service) readdress(ad *admitted, client netip.AddrPort) error {
	if err := s.gateAddr(Inbound, client); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if k := s.adm.ledger.Readdress(time.Now(), &ad.t, client.Addr()); k != admit.None {
		return s.adm.limitError(k)
	}
	return nil
}

// abortConn closes a TCP connection with a reset, so that refused or failed connections do
// not linger in TIME_WAIT.
func abortConn(c net.Conn) {
	if tc, ok := c.(lingerer); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

// lingerer is a connection whose close can reset it (TCP, and wrappers that pass it on).
type lingerer interface{ SetLinger(sec int) error }

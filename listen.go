package tendril

// Listening: binding, the accept loop, and what it does with each connection before the
// handshake (gater, admission).

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/tendril-p2p/tendril/secio"
)

// Listen starts accepting connections on addr (port 0 picks a free port) and returns the
// bound address, with /p2p/ and this node's peer ID. ctx bounds only the bind; the listener
// runs until Close.
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
	network, hostport, err := addr.hostPort()
	if err != nil {
		return Addr{}, err
	}
	lc := net.ListenConfig{KeepAlive: s.tcpKeepAlive()}
	ln, err := lc.Listen(ctx, network, hostport)
	if err != nil {
		return Addr{}, fmt.Errorf("tendril: listen %s: %w", addr.Transport, err)
	}
	l := &listener{ln: ln, legacy: legacy}
	if legacy {
		l.addr = addrFromNet(ln.Addr(), secio.PeerID{})
	} else {
		l.addr = addrFromNet(ln.Addr(), s.id)
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
		remote := remoteAddrPort(c)
		if err := s.gateAddr(Inbound, remote); err != nil {
			abortConn(c)
			s.emitRepeat(Event{Type: EventGated, Addr: addrFromNet(c.RemoteAddr(), secio.PeerID{}), Direction: Inbound, Err: err}, remote.Addr())
			continue
		}
		// A dialer speaks first and at once: a connection whose first message has
		// arrived by now has spoken, and no burst of silent newcomers evicts it.
		spoke := !l.legacy && firstMessageIn(c, peek)
		hctx, ad, err := s.admitInbound(s.ctx, remote, spoke)
		if err != nil {
			abortConn(c)
			if errors.Is(err, ErrConnectionLimit) {
				s.emitRepeat(Event{Type: EventLimitReached, Addr: addrFromNet(c.RemoteAddr(), secio.PeerID{}), Direction: Inbound, Err: err}, remote.Addr())
			}
			continue
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			_, _ = s.setup(hctx, c, ad, secio.PeerID{}, l.legacy)
		}()
	}
}

// abortConn closes a TCP connection with a reset, so that refused or failed connections do
// not linger in TIME_WAIT.
func abortConn(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

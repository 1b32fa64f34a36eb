package tendril

import (
	"fmt"
	"slices"

	"github.com/tendril-p2p/tendril/protocol"
)

// The Service's protocols can change while it runs (AddProtocol, RemoveProtocol). They are
// kept in a map guarded by protoMu, read on every protocol open and accept and never on a
// message's path; s.registry holds the same protocols for negotiation.

// AddProtocol registers p while the Service runs, as if it had been in Config.Protocols:
// from now on peers may open it and so may this node. OpenOnConnect applies to sessions
// established from now on. It is safe for concurrent use with running sessions. An
// invalid protocol, or a name already registered, is an error wrapping ErrInvalidProtocol
// (and protocol.ErrDuplicateProtocol, protocol.ErrInvalidName, ... for the cause).
func (s *Service) AddProtocol(p Protocol) error {
	if err := p.validate(); err != nil {
		return err
	}
	p.Versions = slices.Clone(p.Versions)
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return ErrServiceClosed
	}
	s.protoMu.Lock()
	err := s.addProtocolLocked(&p)
	s.protoMu.Unlock()
	if err != nil {
		return err
	}
	s.emit(Event{Type: EventProtocolAdded, Protocol: p.Name})
	return nil
}

// Protocols returns the protocols registered now, in registration order: the names and
// versions this node speaks, for protocols that tell peers about them (identify). They are
// copies; changing them has no effect. EventProtocolAdded and EventProtocolRemoved report
// the changes.
func (s *Service) Protocols() []Protocol {
	s.protoMu.RLock()
	defer s.protoMu.RUnlock()
	out := make([]Protocol, len(s.protoOrder))
	for i, p := range s.protoOrder {
		out[i] = *p
		out[i].Versions = slices.Clone(p.Versions)
	}
	return out
}

// addProtocolLocked registers a validated protocol. s.protoMu is held (or New is running).
// A protocol this node only opens is not in the registry: peers that open it are refused.
func (s *Service) addProtocolLocked(p *Protocol) error {
	if p.MaxMessageSize > s.cfg.MaxMessageSize {
		return fmt.Errorf("%w %q: MaxMessageSize %d above Config.MaxMessageSize %d", ErrInvalidProtocol, p.Name, p.MaxMessageSize, s.cfg.MaxMessageSize)
	}
	if _, dup := s.protocols[p.Name]; dup {
		return fmt.Errorf("%w %q: %w", ErrInvalidProtocol, p.Name, protocol.ErrDuplicateProtocol)
	}
	if p.served() {
		if err := s.registry.Register(p.info()); err != nil {
			return fmt.Errorf("%w %q: %w", ErrInvalidProtocol, p.Name, err)
		}
	}
	s.protocols[p.Name] = p
	s.protoOrder = append(s.protoOrder, p)
	return nil
}

// RemoveProtocol unregisters the named protocol while the Service runs: peers that open it
// from now on are refused (their OpenProtocol fails with an error wrapping
// protocol.ErrUnknownProtocol), and so is this node's (ErrUnknownProtocol). Its streams open
// now are closed gracefully, as Context.Close does (messages already queued are sent,
// Disconnected follows; a raw StreamHandler sees its Context done): a removed protocol's
// handler is no longer meant to run, and one left running could still send. RemoveProtocol
// does not wait for them. A name that is not registered is an error wrapping
// ErrUnknownProtocol.
func (s *Service) RemoveProtocol(name string) error {
	s.protoMu.Lock()
	p, ok := s.protocols[name]
	if ok {
		delete(s.protocols, name)
		s.protoOrder = slices.DeleteFunc(s.protoOrder, func(q *Protocol) bool { return q == p })
		s.registry.Unregister(name)
	}
	s.protoMu.Unlock()
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownProtocol, name)
	}
	s.emit(Event{Type: EventProtocolRemoved, Protocol: name})
	// A stream of p registered from now on is refused (startStream checks registered), and
	// one registered before is found here.
	for _, sess := range s.Sessions() {
		sess.closeProtocol(p)
	}
	return nil
}

// MaxMessageSize returns Config.MaxMessageSize with its default applied: the largest a
// Protocol's own MaxMessageSize may be.
func (s *Service) MaxMessageSize() int { return s.cfg.MaxMessageSize }

// maxMessage is the largest message of p, in either direction.
func (s *Service) maxMessage(p *Protocol) int {
	if p.MaxMessageSize > 0 {
		return p.MaxMessageSize
	}
	return s.cfg.MaxMessageSize
}

// protocol returns the registered protocol of that name, or nil.
func (s *Service) protocol(name string) *Protocol {
	s.protoMu.RLock()
	defer s.protoMu.RUnlock()
	return s.protocols[name]
}

// registered reports whether p is (still) registered.
func (s *Service) registered(p *Protocol) bool { return s.protocol(p.Name) == p }

// openOnConnect returns the registered protocols marked OpenOnConnect, in the order they
// were registered.
func (s *Service) openOnConnect() []*Protocol {
	s.protoMu.RLock()
	defer s.protoMu.RUnlock()
	var out []*Protocol
	for _, p := range s.protoOrder {
		if p.OpenOnConnect {
			out = append(out, p)
		}
	}
	return out
}

// closeProtocol closes the session's streams of p gracefully.
func (s *Session) closeProtocol(p *Protocol) {
	s.mu.Lock()
	var streams []*protoStream
	for _, ps := range s.streamsLocked() {
		if ps.proto == p {
			streams = append(streams, ps)
		}
	}
	s.mu.Unlock()
	for _, ps := range streams {
		ps.closeLocal()
	}
}

// validate checks one protocol: its name and versions, and at most one handler.
func (p *Protocol) validate() error {
	if err := p.info().Validate(); err != nil {
		return fmt.Errorf("%w %q: %w", ErrInvalidProtocol, p.Name, err)
	}
	n := 0
	for _, set := range []bool{p.Handler != nil, p.StreamHandler != nil, p.RequestHandler != nil} {
		if set {
			n++
		}
	}
	if n > 1 {
		return fmt.Errorf("%w %q: set at most one of Handler, StreamHandler and RequestHandler", ErrInvalidProtocol, p.Name)
	}
	if p.MaxMessageSize < 0 {
		return fmt.Errorf("%w %q: negative MaxMessageSize", ErrInvalidProtocol, p.Name)
	}
	if n == 0 && p.OpenOnConnect {
		return fmt.Errorf("%w %q: OpenOnConnect needs a Handler or StreamHandler", ErrInvalidProtocol, p.Name)
	}
	return nil
}

package tendril

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	"github.com/tendril-p2p/tendril/secio"
)

// EventType says what an Event reports.
type EventType uint8

// The events a Service reports. Failures carry the error in Event.Err.
const (
	EventListenStarted     EventType = iota + 1 // a listener is accepting; Addr is its address
	EventListenClosed                           // a listener stopped; Err is set if it failed
	EventSessionOpened                          // a session is established
	EventSessionClosed                          // a session ended; Err says why (nil: closed locally)
	EventProtocolOpened                         // a protocol stream was negotiated; Protocol, Version
	EventProtocolClosed                         // a protocol stream ended
	EventDialFailed                             // a Dial failed before the handshake (connect error)
	EventHandshakeFailed                        // a secio handshake failed (also peer ID mismatch, self dial)
	EventPeerIDMismatch                         // a dial reached a peer other than the expected one
	EventNegotiationFailed                      // protocol negotiation failed (unknown protocol, no common version, timeout)
	EventLimitReached                           // a connection or stream was refused by a limit
	EventSessionBlocked                         // a send was refused because the session's queue was full
	EventProtocolError                          // a protocol stream failed (oversize or malformed message, reset)
	EventGated                                  // the Admission Gater refused a connection or peer; Err wraps ErrGated
	EventProtocolAdded                          // AddProtocol registered a protocol; Protocol
	EventProtocolRemoved                        // RemoveProtocol unregistered a protocol; Protocol
)

var eventNames = [...]string{
	EventListenStarted:     "listen-started",
	EventListenClosed:      "listen-closed",
	EventSessionOpened:     "session-opened",
	EventSessionClosed:     "session-closed",
	EventProtocolOpened:    "protocol-opened",
	EventProtocolClosed:    "protocol-closed",
	EventDialFailed:        "dial-failed",
	EventHandshakeFailed:   "handshake-failed",
	EventPeerIDMismatch:    "peer-id-mismatch",
	EventNegotiationFailed: "negotiation-failed",
	EventLimitReached:      "limit-reached",
	EventSessionBlocked:    "session-blocked",
	EventProtocolError:     "protocol-error",
	EventGated:             "gated",
	EventProtocolAdded:     "protocol-added",
	EventProtocolRemoved:   "protocol-removed",
}

// String returns the event's name, e.g. "session-opened".
func (t EventType) String() string {
	if int(t) < len(eventNames) && eventNames[t] != "" {
		return eventNames[t]
	}
	return fmt.Sprintf("event(%d)", uint8(t))
}

// Event is something that happened to a Service. Fields that do not apply are zero.
type Event struct {
	Type      EventType
	Time      time.Time
	SessionID uint64       // the session concerned, if any
	Peer      secio.PeerID // the remote peer, if known (authenticated)
	Addr      Addr         // the remote (or, for listen events, local) address
	Direction Direction    // of the session, if any
	Secure    bool         // false for legacy TEA sessions
	Protocol  string       // protocol events
	Version   string       // protocol events
	Err       error        // failures, and why a session or stream ended (see Failed)
	// Count is how many occurrences the event stands for: 1, or more when repeats of a
	// failure from the same peer or address were coalesced (see Service.Events).
	Count int
}

// Failed reports whether the event reports a failure: Err is set and is not the peer
// closing on purpose (ErrPeerClosed), which an EventSessionClosed also carries in Err, so
// that a log of errors need not test for it.
func (e Event) Failed() bool { return e.Err != nil && !errors.Is(e.Err, ErrPeerClosed) }

// lifecycle reports whether t is a lifecycle event: those are never dropped to make room
// for others (see emit).
func (t EventType) lifecycle() bool {
	switch t {
	case EventListenStarted, EventListenClosed, EventSessionOpened, EventSessionClosed,
		EventProtocolAdded, EventProtocolRemoved:
		return true
	}
	return false
}

// String formats the event for logs.
func (e Event) String() string {
	s := e.Type.String()
	if !e.Peer.IsZero() {
		s += " peer=" + e.Peer.String()
	}
	if len(e.Addr.Transport) > 0 {
		s += " addr=" + e.Addr.Transport.String()
	}
	if e.Protocol != "" {
		s += " protocol=" + e.Protocol
	}
	if e.Version != "" {
		s += " version=" + e.Version
	}
	if e.Err != nil {
		s += " err=" + e.Err.Error()
	}
	if e.Count > 1 {
		s += fmt.Sprintf(" count=%d", e.Count)
	}
	return s
}

// logs reports whether the logger takes records of level l. Logging calls on the paths every
// connection takes check it first: their arguments are boxed into a slice before slog looks
// at the level.
func (s *Service) logs(l slog.Level) bool { return s.log.Enabled(context.Background(), l) }

// emit delivers an event without ever blocking the Service: an event that does not fit in
// the buffer is dropped and counted. Lifecycle events (listen started and closed, session
// opened and closed) may use the whole buffer, other events only half of it: however many
// failures a peer provokes, they never crowd out an application's view of who is connected.
func (s *Service) emit(e Event) {
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	if e.Count == 0 {
		e.Count = 1
	}
	if s.logs(slog.LevelDebug) {
		s.log.Debug("event", "type", e.Type.String(), "session", e.SessionID, "peer", e.Peer, "err", e.Err, "count", e.Count)
	}
	s.eventsMu.RLock()
	defer s.eventsMu.RUnlock()
	if s.eventsClosed {
		return
	}
	if !deliver(s.events, e) {
		s.droppedEvents.Add(1)
	}
	for sub := range s.subs {
		if !deliver(sub.ch, e) {
			sub.dropped.Add(1)
		}
	}
}

// Repeated failures are coalesced: per key (a session, or a remote IP before there is one)
// and event type, coalesceBurst events pass in each coalesceWindow; later ones are counted,
// and when the window ends one event stands for them all (Count). A peer sending garbage
// all day costs the application a few events per second, not one per attempt.
const (
	coalesceWindow = time.Second
	coalesceBurst  = 4
	coalesceKeys   = 4096 // beyond this many keys in one window, new keys share one per type
)

type coalesceKey struct {
	typ     EventType
	session uint64
	ip      netip.Addr
}

type coalesceEntry struct {
	passed     int
	suppressed int
	last       Event // the last suppressed event, reported with Count = suppressed
}

type coalescer struct {
	mu      sync.Mutex
	entries map[coalesceKey]*coalesceEntry
	timer   *time.Timer // flushes the window; armed while something is suppressed
	armed   bool
	stopped bool
}

// emitRepeat emits a failure event that a peer can provoke at will, coalesced by the
// event's session or, without one, by ip.
func (s *Service) emitRepeat(e Event, ip netip.Addr) {
	k := coalesceKey{typ: e.Type, session: e.SessionID}
	if k.session == 0 {
		k.ip = ip
	}
	c := &s.coalesce
	c.mu.Lock()
	if c.entries == nil {
		c.entries = make(map[coalesceKey]*coalesceEntry)
	}
	ent := c.entries[k]
	if ent == nil {
		if len(c.entries) >= coalesceKeys {
			k = coalesceKey{typ: e.Type}
			ent = c.entries[k]
		}
		if ent == nil {
			ent = &coalesceEntry{}
			c.entries[k] = ent
		}
	}
	if ent.passed < coalesceBurst {
		ent.passed++
		s.armCoalesceLocked()
		c.mu.Unlock()
		s.emit(e)
		return
	}
	ent.suppressed++
	e.Time = time.Now()
	ent.last = e
	c.mu.Unlock()
}

// armCoalesceLocked starts the window's timer if it is not running.
func (s *Service) armCoalesceLocked() {
	c := &s.coalesce
	if c.armed || c.stopped {
		return
	}
	c.armed = true
	if c.timer == nil {
		c.timer = time.AfterFunc(coalesceWindow, s.flushCoalesced)
	} else {
		c.timer.Reset(coalesceWindow)
	}
}

// flushCoalesced ends a window: one event for each key that had repeats suppressed, and a
// fresh count for every key.
func (s *Service) flushCoalesced() {
	c := &s.coalesce
	c.mu.Lock()
	c.armed = false
	var out []Event
	for _, ent := range c.entries {
		if ent.suppressed > 0 {
			e := ent.last
			e.Count = ent.suppressed
			out = append(out, e)
		}
	}
	clear(c.entries)
	c.mu.Unlock()
	for _, e := range out {
		s.emit(e)
	}
}

// stopCoalescing stops the window timer for good (the Service is closing).
func (s *Service) stopCoalescing() {
	c := &s.coalesce
	c.mu.Lock()
	c.stopped = true
	if c.timer != nil {
		c.timer.Stop()
	}
	c.mu.Unlock()
}

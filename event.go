package tendril

import (
	"context"
	"fmt"
	"log/slog"
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
	Err       error        // failures
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
	return s
}

// logs reports whether the logger takes records of level l. Logging calls on the paths every
// connection takes check it first: their arguments are boxed into a slice before slog looks
// at the level.
func (s *Service) logs(l slog.Level) bool { return s.log.Enabled(context.Background(), l) }

// emit delivers an event without ever blocking the Service: an event that does not fit in
// the buffer is dropped and counted.
func (s *Service) emit(e Event) {
	e.Time = time.Now()
	if s.logs(slog.LevelDebug) {
		s.log.Debug("event", "type", e.Type.String(), "session", e.SessionID, "peer", e.Peer, "err", e.Err)
	}
	s.eventsMu.RLock()
	defer s.eventsMu.RUnlock()
	if s.eventsClosed {
		return
	}
	select {
	case s.events <- e:
	default:
		s.droppedEvents.Add(1)
	}
}

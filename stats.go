package tendril

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/tendril-p2p/tendril/secio"
)

// SessionStats are a session's counters since it opened. Bytes are those of the mux frames
// (stream data and the mux's own headers and control frames) to and from the secure
// connection, before encryption: raw streams count there too. Messages are message-mode
// protocol messages.
type SessionStats struct {
	BytesSent        uint64 // mux bytes written to the secure connection
	BytesReceived    uint64 // mux bytes read from the secure connection
	MessagesSent     uint64 // messages handed to their stream's writer (queued ones not yet)
	MessagesReceived uint64 // messages handed to a Received handler
	StreamsOpened    uint64 // protocol streams this node opened and negotiated
	StreamsAccepted  uint64 // protocol streams the peer opened that this node accepted
	StreamsOpen      int    // protocol streams open now, message and raw
}

// add adds o's counters to st.
func (st *SessionStats) add(o SessionStats) {
	st.BytesSent += o.BytesSent
	st.BytesReceived += o.BytesReceived
	st.MessagesSent += o.MessagesSent
	st.MessagesReceived += o.MessagesReceived
	st.StreamsOpened += o.StreamsOpened
	st.StreamsAccepted += o.StreamsAccepted
	st.StreamsOpen += o.StreamsOpen
}

// Stats returns the session's counters. It is cheap: the counters are atomics, updated on
// the data path without a lock.
func (s *Session) Stats() SessionStats {
	s.mu.Lock()
	open := len(s.streams) + len(s.raw)
	s.mu.Unlock()
	st := SessionStats{
		MessagesSent:     s.counts.msgsSent.Load(),
		MessagesReceived: s.counts.msgsReceived.Load(),
		StreamsOpened:    s.counts.streamsOpened.Load(),
		StreamsAccepted:  s.counts.streamsAccepted.Load(),
		StreamsOpen:      open,
	}
	if s.rconn != nil {
		st.BytesSent, st.BytesReceived = s.rconn.written.Load(), s.rconn.read.Load()
	}
	return st
}

// sessionCounters are the counters of a session that its goroutines update.
type sessionCounters struct {
	msgsSent, msgsReceived         atomic.Uint64
	streamsOpened, streamsAccepted atomic.Uint64
}

// ServiceStats are a Service's counters since New. The session counters (SessionStats)
// cover every session, open or closed; StreamsOpen and the Open counts are current.
type ServiceStats struct {
	SessionStats

	InboundOpen, OutboundOpen   int    // sessions open now, by direction
	InboundTotal, OutboundTotal uint64 // sessions established, by direction

	HandshakesCompleted uint64            // secure and legacy handshakes that succeeded
	HandshakesFailed    HandshakeFailures // handshakes that failed, by reason
}

// HandshakeFailures counts failed handshakes by the kind of error they ended with (the
// sentinels of secio and this package, tested with errors.Is in this order).
type HandshakeFailures struct {
	Timeout        uint64 // secio.ErrHandshakeTimeout
	PeerIDMismatch uint64 // secio.ErrPeerIDMismatch: the dialled /p2p/ ID was not the peer's
	NoCommonSuite  uint64 // secio.ErrNoCommonSuite
	NotTendril     uint64 // secio.ErrNotTendril: something else answered or dialled
	BadPeer        uint64 // an invalid message, signature or key exchange, a self dial or an unsupported version
	Aborted        uint64 // Close, the caller's ctx, or eviction (ErrHandshakeEvicted) stopped it
	Other          uint64 // anything else: mostly I/O errors (the connection reset or closed)
}

// Total returns the sum of all the reasons.
func (h HandshakeFailures) Total() uint64 {
	return h.Timeout + h.PeerIDMismatch + h.NoCommonSuite + h.NotTendril + h.BadPeer + h.Aborted + h.Other
}

// handshakeCounters are HandshakeFailures and the successes, as atomics.
type handshakeCounters struct {
	completed                                                          atomic.Uint64
	timeout, peerID, noCommon, notTendril, badPeer, aborted, otherFail atomic.Uint64
}

// failed counts a failed handshake by err's kind.
func (h *handshakeCounters) failed(err error) {
	c := &h.otherFail
	switch {
	case errors.Is(err, secio.ErrHandshakeTimeout):
		c = &h.timeout
	case errors.Is(err, secio.ErrPeerIDMismatch):
		c = &h.peerID
	case errors.Is(err, secio.ErrNoCommonSuite):
		c = &h.noCommon
	case errors.Is(err, secio.ErrNotTendril):
		c = &h.notTendril
	case errors.Is(err, secio.ErrInvalidMessage), errors.Is(err, secio.ErrInvalidSignature),
		errors.Is(err, secio.ErrInvalidKeyExchange), errors.Is(err, secio.ErrUnsupportedVersion),
		errors.Is(err, secio.ErrSelfDial), errors.Is(err, secio.ErrAuthFailed):
		c = &h.badPeer
	case errors.Is(err, ErrHandshakeEvicted), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		c = &h.aborted
	}
	c.Add(1)
}

func (h *handshakeCounters) load() HandshakeFailures {
	return HandshakeFailures{
		Timeout: h.timeout.Load(), PeerIDMismatch: h.peerID.Load(), NoCommonSuite: h.noCommon.Load(),
		NotTendril: h.notTendril.Load(), BadPeer: h.badPeer.Load(), Aborted: h.aborted.Load(), Other: h.otherFail.Load(),
	}
}

// Stats returns the Service's counters: its sessions' (the open ones' and those of the
// sessions that have closed), sessions by direction, and handshakes. It takes the
// Service's lock briefly, never a lock of the data path.
func (s *Service) Stats() ServiceStats {
	s.mu.Lock()
	st := ServiceStats{
		SessionStats:  s.closedStats,
		InboundTotal:  s.sessionTotals[Inbound],
		OutboundTotal: s.sessionTotals[Outbound],
	}
	sessions := make([]*Session, 0, len(s.sessions))
	for _, sess := range s.sessions {
		sessions = append(sessions, sess)
	}
	s.mu.Unlock()
	for _, sess := range sessions {
		st.SessionStats.add(sess.Stats())
		if sess.dir == Inbound {
			st.InboundOpen++
		} else {
			st.OutboundOpen++
		}
	}
	st.HandshakesCompleted = s.handshakes.completed.Load()
	st.HandshakesFailed = s.handshakes.load()
	return st
}

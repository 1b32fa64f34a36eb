package connmgr

import (
	"fmt"
	"time"

	ma "github.com/multiformats/go-multiaddr"

	"github.com/tendril-p2p/tendril/secio"
)

// EventType says what an Event reports.
type EventType uint8

// The events a Manager reports.
const (
	EventDialStarted   EventType = iota + 1 // a dial to Peer at Addr started
	EventDialSucceeded                      // it ended with a session
	EventDialFailed                         // it failed: Err; NextTry is when the address may be dialled again
	EventKeptConnected                      // a kept peer has a session (again)
	EventKeptLost                           // a kept peer's last session ended; the Manager redials it
)

var eventNames = [...]string{
	EventDialStarted:   "dial-started",
	EventDialSucceeded: "dial-succeeded",
	EventDialFailed:    "dial-failed",
	EventKeptConnected: "kept-connected",
	EventKeptLost:      "kept-lost",
}

// String returns the event's name, e.g. "dial-failed".
func (t EventType) String() string {
	if int(t) < len(eventNames) && eventNames[t] != "" {
		return eventNames[t]
	}
	return fmt.Sprintf("event(%d)", uint8(t))
}

// Event is something the Manager did or saw.
type Event struct {
	Type EventType
	Time time.Time
	Peer secio.PeerID
	Addr ma.Multiaddr // the address dialled, for dial events
	Kept bool         // the peer is kept (KeepConnected)
	Err  error
	// NextTry is when a failed address may be dialled again.
	NextTry time.Time
}

// String formats the event for logs.
func (e Event) String() string {
	s := e.Type.String() + " peer=" + e.Peer.String()
	if len(e.Addr) > 0 {
		s += " addr=" + e.Addr.String()
	}
	if e.Kept {
		s += " kept"
	}
	if e.Err != nil {
		s += " err=" + e.Err.Error()
	}
	if !e.NextTry.IsZero() {
		s += " next=" + e.NextTry.Format(time.RFC3339Nano)
	}
	return s
}

package identify

import (
	"time"

	ma "github.com/multiformats/go-multiaddr"
	"github.com/tendril-p2p/tendril/peerrecord"
	"github.com/tendril-p2p/tendril/secio"
)

// Info is what a connected peer last said about itself. It is shared: do not modify its
// slices.
type Info struct {
	// Peer is the peer's authenticated ID: the session's, which the record's key matches.
	Peer secio.PeerID
	// Record is the peer's signed record: its key, sequence number and the addresses it
	// advertises. It verifies under the peer's key, so it can be passed on to others.
	Record *peerrecord.Record
	// Observed is the address the peer sees this node at (its session's remote address),
	// nil if it did not say. The peer is not verified to tell the truth: count observers
	// across groups (ObservedAddrs) before believing one.
	Observed ma.Multiaddr
	// Protocols lists the protocols the peer speaks, with their versions.
	Protocols []ProtoVersions
	// Agent is the peer's software, as it names it.
	Agent string
	// At is when this update was accepted.
	At time.Time
}

// Stats are an Identify's counters since New.
type Stats struct {
	Received uint64 // messages received from peers
	Accepted uint64 // updates accepted (OnIdentify calls)
	Dropped  uint64 // updates dropped unread: their session was over its rate
	Stale    uint64 // updates ignored: the record was not newer than the one accepted
	Verified uint64 // records parsed and their signatures verified
	Rejected uint64 // streams closed because of what the peer sent (OnError calls)
	Ignored  uint64 // messages that came after their stream was closed for an error
	Sent     uint64 // messages sent: one per new stream, then the pushes
}

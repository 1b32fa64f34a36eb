// Package identify tells every peer of a tendril Service who this node is, and learns
// the same of each: its signed peer record (identity key, listen addresses, sequence
// number), the address it sees the other side at, the protocols it speaks and its agent
// string.
//
// Identify runs on the Service's public API only: it registers the protocol
// "/tendril/identify" (version "1", message mode, opened by the dialling side of every
// session), and a Subscription tells it when listeners or protocols change, which it
// then pushes to its peers. Only the record is signed, with the node's identity key
// (peerrecord): it is what may be passed on to third peers, who can check it against its
// owner. The rest is believed because it comes over the authenticated session from the
// peer itself; the observed address, in particular, is one peer's claim, which
// ObservedAddrs weighs by how many address groups report it.
//
// Every byte is a stranger's. A message is at most MaxMessageSize (4 KiB) and each field
// has its cap; an update is checked against its session's token bucket (Config.UpdateBurst
// at once, one per Config.UpdateInterval) before it is parsed, so a peer makes this node
// verify at most that many signatures (about 60 µs each) however fast it sends; a record
// equal to the one accepted last is not verified again, a record not newer than it is
// ignored, and one signed by another key than the session's (ErrWrongPeer), a malformed
// message (ErrMalformed, ErrTooLarge, ErrBadRecord) or more than Config.MaxDropped
// updates over the rate (ErrFlood) close the peer's identify stream, never its session.
// What is kept per session is its last update (at most a record of 1 KiB and a message of
// 4 KiB) and is dropped with the stream. docs/RELIABILITY.md has the figures.
//
// The wire format of a message (integers are unsigned varints unless sized):
//
//	version   1 byte, 1
//	record    length, then a peerrecord encoding (at most peerrecord.MaxSize)
//	observed  length (0: none), then the binary multiaddr the sender sees the
//	          receiver at (at most MaxObservedAddr)
//	agent     length, then UTF-8 (at most MaxAgent)
//	count     the number of protocols (at most MaxProtocols)
//	protocols count times: length and name (UTF-8, starting with "/", at most
//	          MaxProtocolName, no name twice), 1 byte the number of versions (at most
//	          MaxVersions), then each version: length and UTF-8 (1 to MaxVersionLen)
//
// Nothing may follow. A later version of the format is a new protocol version, which
// the Service negotiates.
package identify

// Package reach tells a tendril node whether it can be reached, address by address, by
// having its peers dial it back, and serves the same to them within limits that keep it
// from being used against anyone else.
//
// # Client
//
// The candidates are the addresses worth testing: each IP that connected peers observe
// this node at (identify) with each listen port of the same shape, the addresses given to
// AddCandidate (a port mapping), and listen addresses on public IPs. For each candidate,
// Reach asks connected peers that observe this node at that IP, one request per peer with
// every candidate it can test, peers of different address groups (Config.Group) in
// parallel. A group's answer counts once: an address is Public once Config.Confirmations
// (2) groups dialled it back and outnumber those that failed, Private once as many failed
// and outnumber those that succeeded, Unknown otherwise. So two peers in two groups
// decide, one peer (or one operator's many) never does, and one group that cannot reach a
// public node does not make it private. Changes are Events; Status and Reachability tell
// the state at any time. Decided addresses are asked about again after
// Config.RecheckInterval; answers count for Config.MaxResultAge.
//
// # Server
//
// A requester's candidates are dialled only at the IP its session comes from (/ip4 or
// /ip6: anything else is refused, never dialled), at most Config.MaxCandidates per
// request; per requester address (IPv4 address, IPv6 /64) Config.ServeBurst requests, then
// one per Config.ServeInterval; at most Config.MaxConcurrentDials dial-backs at once and
// Config.DialRate a second for everyone, and a request that finds no room is refused
// (ErrBusy) rather than queued. A dial-back is tendril.Service.Probe: a fresh connection
// and the handshake up to the requester's proven identity, then closed without a session,
// within Config.DialBackTimeout. docs/RELIABILITY.md has the figures.
//
// # Wire format
//
// Protocol "/tendril/reach", version "1", request mode. A request: version (1 byte, 1),
// count (1 byte, 1 to MaxCandidates), then count times a uvarint length (1 to MaxAddrLen)
// and a binary multiaddr. A reply: version (1 byte, 1), status (1 byte: 0 served, 1 rate
// limited, 2 busy), count (1 byte: the request's count when served, else 0), then one
// Result byte per candidate in order (0 ok, 1 failed, 2 refused, 3 skipped). Nothing may
// follow either; a malformed request gets a tendril.RequestError (ErrMalformed).
package reach

// Package tendril is a multiplexed, encrypted peer-to-peer transport.
//
// A [Service] owns an Ed25519 identity (its [secio.PeerID] is the BLAKE3 multihash of the
// public key), listens on and dials TCP multiaddrs, and turns every connection into a
// [Session]: a secio handshake (signed Diffie-Hellman, AEAD-framed data), a yamux session
// over it, and on each stream one negotiated, versioned [Protocol].
//
// Protocols are registered in [Config.Protocols] with a name, the versions they speak and a
// [Handler]. For each session and protocol, a handler's Connected, Received and Disconnected
// calls are sequential and in order; different sessions run concurrently. Messages are sent
// with [Context.Send], [Session.Send], [Service.Send] or [Service.Broadcast]; every session
// has a bounded send queue, so a slow peer slows its senders ([ErrSessionBlocked]) instead
// of growing memory.
//
// Everything that happens to the Service, failures included, is reported on [Service.Events].
//
// The layers below are usable on their own: hash/blake3, cipher/aead, cipher/tea, secio,
// mux and protocol. docs/ARCHITECTURE.md describes how they fit.
package tendril

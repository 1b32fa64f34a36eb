// Package connmgr keeps a tendril node connected: it keeps Target outbound sessions up
// with peers drawn from the address book, spread across address groups so that no
// operator's addresses take every slot, and it keeps the peers an application names
// (KeepConnected) connected whatever the target.
//
// Each address that fails waits before its next dial, exponentially longer after each
// failure, with jitter (Backoff); a session that lasts (Config.StableAfter) and news of
// the peer (Refresh, called by identify and discovery) end the wait's growth. Status
// answers "why am I not connected to X": the last attempts and their errors, the next
// try, and what holds the peer back now. Events reports dials and kept peers' comings
// and goings.
//
// The Manager uses only the Service's public API: Dial, Sessions, Subscribe, and
// Admission.Protect, which the node's assembly sets to Manager.Protect so that kept
// peers' inbound sessions are never trimmed. It cooperates with the Service's rules:
// a peer with a session is never dialled (Dial would return that session), a dial that
// the duplicate-session rule resolves to the other side's connection counts as a
// success, and a dial refused by the outbound admission share (Admission.MaxOutbound)
// is no fault of the address and grows no backoff.
//
// The decisions (which address, whether a dial fits the slots and its group's share,
// how long to wait) are plain functions tested on a fixed clock; the Manager is their
// loop: one goroutine, plus one per dial in progress, all ended by Close.
package connmgr

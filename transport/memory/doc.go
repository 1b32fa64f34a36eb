// Package memory is an in-process transport: hosts of a Network dial and listen on
// /memory/N addresses, with no sockets, so that tests and simulations run tens of nodes in
// one process. Each direction between two hosts is a Link with a one-way delay and a
// rate, so that round trips and transfer times are those of the network simulated.
//
// A connection behaves as TCP over its links, in the ways tendril depends on:
//
//   - Bytes written at time t leave when the link is free, occupy it for their length
//     divided by its Rate (connections between the same two hosts share it), and arrive
//     Delay after leaving; a read sees only arrived bytes, in order. A Dial takes a round
//     trip, and a close reaches the peer after the bytes written before it.
//   - Each direction holds at most Link.Buffer bytes written and not yet read; Write blocks
//     while it is full, which flow-controls a writer as TCP's window does and bounds a
//     connection's memory.
//   - The connection is a full net.Conn: deadlines, Close, CloseWrite, and errors that
//     match the socket errors of the same cases (ErrRefused is ECONNREFUSED).
//
// With the zero Link (no delay, no rate), writes are readable at once and cost a copy in
// and a copy out. No goroutine runs for a connection or listener: waiting readers and
// writers sleep on condition variables, woken by each other, by one timer for the next
// arrival, and by their deadlines' timers.
//
// Numbers are the network's, not a host's: /memory/N names one listener in its
// Network, and the local end of a dialled connection takes a number of its own, as a TCP
// connection takes an ephemeral port. Numbers from 49152 up are picked for /memory/0 and
// for dialled connections; smaller ones are only ever those a caller asked for.
package memory

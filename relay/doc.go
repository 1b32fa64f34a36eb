// Package relay lets a node that cannot be dialled (behind a NAT or a firewall) be reached
// through one that can: the private node reserves a slot on a public relay, and is then
// reachable at a circuit address,
//
//	/ip4/1.2.3.4/tcp/4001/p2p/RELAY/p2p-circuit/p2p/TARGET
//
// (ParseCircuit, Circuit). A dialer (Dial) asks the relay for a circuit to the target;
// the relay asks the target, and splices the dialer's stream to the target's. The circuit
// is a net.Conn (Conn) at each end, on which the two ends run their own handshake,
// through tendril.Service.DialConn and ServeConn: the target's identity is verified end
// to end, and the relay carries only ciphertext. The relayed session is a Service session
// like any other; its RemoteAddr is RELAYTRANSPORT/p2p-circuit/p2p/PEER (IsRelayed): the
// relay's peer ID is not part of it, because tendril.Addr keeps /p2p/ out of the
// multiaddr (see tendril.Addr). It is meant as a way to meet (a handshake, the
// coordination of a hole punch, a little traffic), as in libp2p's circuit relay v2.
//
// # Bounds
//
// A relay (NewRelay, RelayConfig) holds at most MaxReservations reservations (and at most
// MaxReservationsPerIP and MaxReservationsPerSubnet from one address and subnet), made at
// most ReservationRate a second, and at most MaxCircuits circuits, MaxCircuitsPerPeer
// with any one peer as dialer or target, requested at most ConnectRate a second; every
// hop request of a peer takes a token of its own bucket (RequestBurst, RequestInterval)
// first. A circuit carries at most MaxCircuitBytes each way and lives at most
// MaxCircuitDuration; then the relay closes it and tells both ends why (a *CircuitError).
// Each circuit costs the relay two goroutines and two 16 KiB frame buffers; its streams
// are bounded by the sessions' mux flow control and memory budgets, and the sessions by
// the Service's admission. A target (NewClient, ClientConfig) takes circuits only from
// relays it holds a reservation with, at most MaxCircuits at once, each subject to its
// Accept policy and to the Service's handshake and session limits.
//
// # Wire format
//
// Two protocols, each version "1", in raw mode: "/tendril/relay/hop", which peers open to
// the relay, and "/tendril/relay/stop", which the relay opens to a target. A control
// message is a uvarint length (1 to 512) and a body; peer IDs are a uvarint length (at
// most 64) and the ID's bytes; limits are two uvarints, bytes (at least 1) and seconds
// (1 to 86400).
//
//	hop request       type (1 byte): 1 RESERVE | 2 CONNECT, then for CONNECT the target's ID
//	RESERVE answer    status (1 byte); if OK: lifetime in seconds (uvarint), limits
//	CONNECT answer    status (1 byte); if OK: limits
//	stop request      type 2, the dialer's ID, the dialer's address as the relay sees
//	                  it (uvarint length, at most 256, and multiaddr bytes), limits
//	stop answer       status (1 byte)
//
// Statuses: 0 OK, 1 malformed, 2 rate limited, 3 reservation refused, 4 no reservation,
// 5 resource limit, 6 connect failed, 7 refused (Status). After a failure status the
// stream is closed. After an OK answer to CONNECT (on the dialer's hop stream) and to the
// stop request (on the target's stop stream), each stream carries frames: a uvarint
// length from 1 to 16384 and that many bytes, forwarded whole by the relay. A frame of
// length 0 is a close notice, sent only by the relay, followed by one byte, the
// CloseCode (1 byte limit, 2 duration limit, 3 relay closing, 4 other end reset,
// 5 malformed frame); the relay then closes the stream. An end that closes its write side
// has the relay close the other stream's write side: the other end reads io.EOF.
package relay

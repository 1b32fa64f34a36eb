// Package holepunch upgrades a relayed session to a direct one: the two ends, which reach
// each other only through a relay (package relay), tell each other where their NATs map
// their listen ports, and open TCP connections to each other from those ports at the same
// moment. Each NAT sees an outgoing connection to the other end's address and lets the
// other end's packets in; the two connection attempts meet as one connection (a TCP
// simultaneous open, or the listener on one end accepts it). The two ends then run the
// handshake on it through tendril.Service.DialConn and ServeConn, and the Service's
// duplicate rule keeps the direct session and closes the relayed one gracefully (see
// tendril.Session.Relayed): new streams and messages go the direct way.
//
// It works through NATs that map a port to the same external port whatever the
// destination (endpoint-independent mapping, RFC 4787), whatever their filtering; Linux's
// masquerading and most home routers are such NATs. A NAT that gives every destination a
// new port (a symmetric NAT) cannot be punched by predicting the port: the session stays
// relayed, and the report says why (Puncher.Report).
//
// # Roles and timing
//
// The end that accepted the relayed session (the one holding the relay reservation) is the
// initiator; it is the dialer of the direct session's handshake, the other end its
// listener. An attempt runs on a stream of the protocol "/tendril/holepunch" (version 1):
//
//	initiator -> CONNECT (its addresses)
//	responder -> CONNECT (its addresses)     the initiator measures the relayed round trip
//	initiator -> SYNC                        and dials the responder's addresses at once
//	                                         the responder dials on receiving SYNC
//
// The initiator's connection attempt always leaves first, so the responder's arrives at a
// socket that is already connecting (a simultaneous open), never at the initiator's
// listener: were it accepted there, both ends would take the listener's role in the
// handshake. The responder's listener may accept the initiator's attempt (an end without
// a NAT, or one whose NAT lets it in): that matches the roles. A failed attempt is
// retried on a new stream, up to Config.MaxAttempts.
//
// # Punching again
//
// Two ends can punch again between the same two listen ports right after their previous
// direct connection closed, whichever end closed it (a peer that reconnects, or restarts
// on the same port). A TCP end that sends its FIN before the other's keeps the
// connection's four-tuple in TIME_WAIT for a minute; Linux lets a connect from a bound
// port reuse such a tuple only if the old connection carried TCP timestamps (peers
// without them, such as Windows by default, exist), and otherwise fails it with
// EADDRNOTAVAIL; the other end's SYN then meets that end's listener, in the wrong role
// for the handshake, or, behind a NAT that the failed connect did not open, nothing. So no
// end keeps it: secio's Close lets only the handshake's dialer send the first FIN, and the
// listener, once that FIN has arrived, resets the connection instead of sending its own
// (see secio.Conn.Close). Measured in the lab (TestLabRepunch): with an end without
// timestamps, a second punch within seconds failed with EADDRNOTAVAIL in 5 of 7 set-ups
// before; every one goes direct now.
//
// # Wire format
//
// Each message is a uvarint length (1 to 1024) and a body whose first byte is its type.
//
//	CONNECT  1, flags (1 byte; bit 0: the sender's NAT does not keep ports), then
//	         a count (at most MaxAddrs) and as many addresses, each a uvarint length
//	         (at most 128) and multiaddr bytes
//	SYNC     2
//
// # Bounds
//
// A peer can make this node dial only through a relayed session (a relay's limits apply),
// at most MaxAttempts attempts per AttemptWindow and one at a time per peer, AttemptRate a
// second in all after a burst of AttemptBurst, at most
// MaxConcurrent punches in flight in total, each attempt dialling at most MaxAddrs
// addresses that Allow accepts (public IPs by default) for at most AttemptTimeout. The
// peers tracked for the per-peer limit are bounded by maxTrackedPeers.
package holepunch

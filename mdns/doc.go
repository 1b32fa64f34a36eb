// Package mdns finds peers on the local network: each Service announces one instance of a
// DNS-SD service type (default "_tendril._udp.local") over multicast DNS (RFC 6762,
// RFC 6763) with an opaque payload in its TXT record, and reports the other instances it
// sees through Config.OnFound. It knows nothing of tendril: the payload (a signed peer
// record, say) is bytes to it, and everything it reports is untrusted.
//
// # Finding peers fast and reliably
//
// On each interface and IP version (a link) a Service queries at start (after 20-120 ms
// of jitter), then 1 s, 2 s, 4 s ... apart up to 60 s, and announces itself three times
// (at once, 1 s and 3 s later) and again whenever the payload or the interface's addresses
// change. A query carries the instances already known (RFC 6762 section 7.1), so
// established peers stay quiet and new ones answer. Two Services that start together
// usually find each other within milliseconds, and a lost packet costs a second.
// The interface list is re-read every second: an interface that comes up later is joined
// and gets its own queries and announcements. A send that fails (an IPv6 address still in
// duplicate address detection) is retried a few times. The socket is bound with
// SO_REUSEADDR and SO_REUSEPORT, so several processes on a host (and other responders)
// share port 5353, and multicast loopback is on, so they see each other. Close sends a
// goodbye, so peers forget the instance at once.
//
// # Bounds against hostile packets
//
// Every datagram is attacker data. A Service reads at most 9,000 bytes, parses a packet
// only if its header announces at most 64 records, takes at most 4 instances per packet,
// 8 addresses per instance and MaxPayload bytes of payload, and remembers at most
// MaxInstances instances (the least recently seen are evicted). It reports an instance
// when it is new or changed, or after RefreshInterval, at most 4 reports per packet read.
// It multicasts at most one response per link per second however many queries arrive
// (RFC 6762 section 6), so it never floods the LAN on anyone's behalf. It runs one
// goroutine per socket and one for its timers, never one per packet. Dropped packets are
// counted in Stats.
//
// Not implemented: probing and conflict resolution for the instance name (RFC 6762
// section 8; random instance labels make conflicts improbable, and a conflict only
// confuses the two colliding peers), unicast replies to legacy one-shot queries (section
// 6.7) and to the QU bit (a multicast answer serves the querier too), and TC-bit
// continuation of known-answer lists.
//
// # Why not github.com/hashicorp/mdns
//
// The package uses github.com/miekg/dns only to pack and unpack messages; the sockets,
// schedules and bounds are its own. hashicorp/mdns v1.0.7 (itself built on miekg/dns) was
// read and rejected because its server answers every query at once, with no per-record
// rate limit, so a query flood becomes a response flood; it logs every malformed packet
// through log.Default unless given a logger; it listens with net.ListenMulticastUDP on one
// interface (or the system default), never re-reads the interface list, and sets no
// SO_REUSEPORT, so a late interface is never used. Its client is a one-shot Lookup with a
// timeout (default 1 s) that opens new sockets each time, sends a single query from an
// ephemeral port (so RFC 6762 responders may answer by unicast only) and leaves repetition
// to the caller; its in-progress map grows with every instance name a packet mentions for
// the lookup's duration, and every incomplete answer makes it send another multicast
// query, so a stranger's packets make it transmit. It keeps TXT strings as text and
// has no payload size limit. (It does not start a goroutine per packet: one per socket.)
package mdns

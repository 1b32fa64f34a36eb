package mdns

import "sync/atomic"

// Stats counts what a Service received and sent. Every dropped packet is counted under
// exactly one reason.
type Stats struct {
	// PacketsReceived counts datagrams read, on interfaces in use or not.
	PacketsReceived uint64
	// ForeignInterface counts datagrams that arrived on an interface not in use (Linux
	// delivers a group's packets from every interface where any socket joined it).
	ForeignInterface uint64
	// Oversized counts datagrams longer than 9,000 bytes, dropped.
	Oversized uint64
	// TooManyRecords counts datagrams whose header announced more than 64 records,
	// dropped unparsed.
	TooManyRecords uint64
	// Malformed counts datagrams that did not parse as DNS, dropped.
	Malformed uint64
	// QueriesForUs counts queries that asked for our records without knowing the answer.
	QueriesForUs uint64
	// AnswersMerged counts such queries that did not cause a send of their own: a
	// response or announcement was already pending, and the rate limit (one multicast per
	// second per link) holds.
	AnswersMerged uint64
	// RecordsSkipped counts instances in responses that were ignored: another service,
	// a bad label, incomplete, a payload over MaxPayload, or beyond 4 per packet.
	RecordsSkipped uint64
	// BadSourcePort counts responses ignored because they came from a port other than
	// 5353 (RFC 6762 section 6).
	BadSourcePort uint64
	// Reports counts OnFound calls.
	Reports uint64
	// Evicted counts instances forgotten to make room (MaxInstances).
	Evicted uint64
	// QueriesSent and ResponsesSent count multicasts sent, announcements included in
	// ResponsesSent; SendErrors counts those that failed.
	QueriesSent, ResponsesSent, SendErrors uint64
	// Instances is how many instances are remembered now.
	Instances int
	// Links is how many interface and family pairs are in use now.
	Links int
}

// counters are the atomic fields behind Stats.
type counters struct {
	received, foreign, oversized, tooMany, malformed atomic.Uint64
	queries, merged, skipped, reports, badPort       atomic.Uint64
	queriesSent, responsesSent, sendErrors           atomic.Uint64
}

// Package pex is peer exchange: a node asks its connected peers for the signed records
// (peerrecord) of other peers they know, and answers theirs from its address book
// (addrbook), so that a node given one bootstrap address comes to know many.
//
// Only signed records travel: an answerer can repeat or withhold a peer's record, never
// change it or make one up, and the asker verifies each against its owner's key before any
// address enters its book. Addresses the book has from elsewhere (a user, a bootstrap list)
// are never passed on.
//
// Everything a peer sends is bounded before it costs work. An answer is refused whole,
// before any record is parsed, when it is larger than Config.MaxAnswerBytes or lists more
// than Config.MaxAnswer records, so one answer costs at most MaxAnswer signature checks, and
// answers come only when this node asks (at most Config.MaxAsksInFlight at once). Records
// of this node, addresses of this node, and (from a public peer) unroutable addresses are
// dropped; a peer that sends Config.BadRecordLimit bad records is not asked again for
// Config.IgnoreFor. What an answerer passes on is added to the book as
// addrbook.FromPeer(its group), so one peer's answers reach a bounded number of the book's
// buckets. Serving is rate limited per asking peer and in total, with a bounded table of
// asking peers; a refused request costs a map lookup.
//
// The protocol is "/tendril/pex", version "1", in request mode (tendril.Protocol's
// RequestHandler: one stream per request). The request is one unsigned varint, the number
// of records wanted. The answer is
//
//	count    uvarint, at most the number asked
//	records  count times: uvarint length (at most peerrecord.MaxSize), then the record
//
// An answerer that refuses (rate limit) fails the request: the asker gets a
// *tendril.RequestError, which Ask reports as ErrRateLimited.
package pex

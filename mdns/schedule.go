package mdns

import "time"

// minMulticastGap is the least time between two multicasts of our records on one link:
// RFC 6762 section 6 ("at least one second"). Whatever floods us with queries, or calls
// SetPayload in a loop, each link sends at most one response per second.
const minMulticastGap = time.Second

// firstAnnounceDelay holds a new link's first announcement back behind its first query
// (sent after 20-120 ms), as RFC 6762 section 8 holds it behind probing. Peers that start
// together then find each other by their queries' answers at once: an announcement sent
// at start, before the peer listens, is lost, and would make the answer to the peer's query
// wait out minMulticastGap (1 s).
const firstAnnounceDelay = 250 * time.Millisecond

// querySchedule times a link's queries: the first at once (after the caller's jitter),
// then waits of first, 2*first, 4*first ... capped at max (RFC 6762 section 5.2).
type querySchedule struct {
	next  time.Time
	wait  time.Duration
	first time.Duration
	max   time.Duration

	failures int // consecutive failed sends
}

func newQuerySchedule(now time.Time, jitter, first, max time.Duration) querySchedule {
	return querySchedule{next: now.Add(jitter), wait: first, first: first, max: max}
}

// due reports whether a query should go out at now.
func (q *querySchedule) due(now time.Time) bool { return !now.Before(q.next) }

// sent records a query sent at now and schedules the next.
func (q *querySchedule) sent(now time.Time) {
	q.failures = 0
	q.next = now.Add(q.wait)
	q.wait = min(2*q.wait, q.max)
}

// maxRetries is how many consecutive failed sends are retried after a fixed wait before the
// schedule moves on as if they had been sent: enough to ride out an IPv6 address in
// duplicate address detection (about a second or two), bounded for a link that never works.
const maxRetries = 4

// failed records a query that could not be sent at now (say, an IPv6 address not ready
// yet): retry after the first wait, without doubling, at most maxRetries times in a row.
func (q *querySchedule) failed(now time.Time) {
	if q.failures == maxRetries {
		q.sent(now)
		return
	}
	q.failures++
	q.next = now.Add(q.first)
}

// sender decides when a link multicasts our records: for announcements (count of them,
// 1 s then 2 s, 4 s ... apart, RFC 6762 section 8.3) and for answers to queries, never two
// sends closer than minMulticastGap. Requests that arrive while one is pending merge into
// it, so the number of packets sent does not grow with the number of queries received.
type sender struct {
	last        time.Time // last multicast; zero if none
	announceAt  time.Time // next announcement; zero if none left
	announceGap time.Duration
	announceN   int       // announcements left after the one at announceAt
	answerAt    time.Time // pending answer to a query; zero if none
	failures    int       // consecutive failed sends
}

// announce (re)starts a run of n announcements from now.
func (s *sender) announce(now time.Time, n int) {
	s.announceAt = now
	s.announceGap = time.Second
	s.announceN = n - 1
}

// answer asks for a response to a query received at now, delayed by jitter (RFC 6762
// section 6: 20-120 ms for shared records such as the PTR). It reports whether a new
// send was scheduled (false: merged into one pending, or suppressed).
func (s *sender) answer(now time.Time, jitter time.Duration) bool {
	if !s.answerAt.IsZero() || (!s.announceAt.IsZero() && !s.announceAt.After(now.Add(jitter))) {
		return false
	}
	s.answerAt = now.Add(jitter)
	return true
}

// next returns when the next send is due, after the rate limit; zero if none is pending.
func (s *sender) next() time.Time {
	var t time.Time
	for _, c := range []time.Time{s.announceAt, s.answerAt} {
		if !c.IsZero() && (t.IsZero() || c.Before(t)) {
			t = c
		}
	}
	if t.IsZero() {
		return t
	}
	if !s.last.IsZero() && t.Before(s.last.Add(minMulticastGap)) {
		t = s.last.Add(minMulticastGap)
	}
	return t
}

// due reports whether a send should happen at now.
func (s *sender) due(now time.Time) bool {
	t := s.next()
	return !t.IsZero() && !now.Before(t)
}

// sent records a multicast at now: it satisfies the pending answer, and the announcement
// if one was due.
func (s *sender) sent(now time.Time) {
	s.failures = 0
	s.last = now
	s.answerAt = time.Time{}
	if !s.announceAt.IsZero() && !now.Before(s.announceAt) {
		if s.announceN == 0 {
			s.announceAt = time.Time{}
		} else {
			s.announceN--
			s.announceAt = now.Add(s.announceGap)
			s.announceGap *= 2
		}
	}
}

// failed records a send that failed at now: the rate limit still counts it, a pending
// answer is dropped (its querier asks again), and an announcement stays due, so that an
// interface that was not ready still gets all its announcements; after maxRetries failures
// in a row it counts as sent.
func (s *sender) failed(now time.Time) {
	if s.failures == maxRetries {
		s.sent(now)
		return
	}
	s.failures++
	s.last = now
	s.answerAt = time.Time{}
}

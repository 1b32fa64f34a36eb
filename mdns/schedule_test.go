package mdns

import (
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestQueryScheduleDoublesToCap(t *testing.T) {
	q := newQuerySchedule(t0, 50*time.Millisecond, time.Second, 60*time.Second)
	var at []time.Duration
	for now := t0; now.Before(t0.Add(200 * time.Second)); now = now.Add(10 * time.Millisecond) {
		if q.due(now) {
			at = append(at, now.Sub(t0))
			q.sent(now)
		}
	}
	ms := time.Millisecond
	want := []time.Duration{50 * ms, 1050 * ms, 3050 * ms, 7050 * ms, 15050 * ms, 31050 * ms, 63050 * ms, 123050 * ms, 183050 * ms}
	if len(at) != len(want) {
		t.Fatalf("queries at %v, want %v", at, want)
	}
	for i := range want {
		if at[i] != want[i] {
			t.Fatalf("queries at %v, want %v", at, want)
		}
	}
}

// drive advances a fixed clock in 10 ms steps and records when s sends.
func drive(s *sender, from time.Time, d time.Duration, each func(now time.Time)) []time.Duration {
	var at []time.Duration
	for now := from; now.Before(from.Add(d)); now = now.Add(10 * time.Millisecond) {
		if each != nil {
			each(now)
		}
		if s.due(now) {
			s.sent(now)
			at = append(at, now.Sub(from))
		}
	}
	return at
}

func TestAnnouncements(t *testing.T) {
	var s sender
	s.announce(t0, 3)
	at := drive(&s, t0, 10*time.Second, nil)
	want := []time.Duration{0, time.Second, 3 * time.Second}
	if len(at) != 3 || at[0] != want[0] || at[1] != want[1] || at[2] != want[2] {
		t.Fatalf("announcements at %v, want %v", at, want)
	}
}

func TestAnswerFloodIsRateLimited(t *testing.T) {
	var s sender
	s.last = t0.Add(-time.Hour)
	// A query every 10 ms for 10 s: at most one send per second.
	at := drive(&s, t0, 10*time.Second, func(now time.Time) { s.answer(now, 20*time.Millisecond) })
	if len(at) > 10 || len(at) < 9 {
		t.Fatalf("%d sends for 1,000 queries in 10 s: %v", len(at), at)
	}
	for i := 1; i < len(at); i++ {
		if at[i]-at[i-1] < minMulticastGap {
			t.Fatalf("sends %v apart", at[i]-at[i-1])
		}
	}
	// The first answer waits only for its jitter.
	if at[0] != 20*time.Millisecond {
		t.Fatalf("first answer at %v", at[0])
	}
}

func TestPayloadChurnIsRateLimited(t *testing.T) {
	var s sender
	// SetPayload every 10 ms restarts the announcements each time.
	at := drive(&s, t0, 5*time.Second, func(now time.Time) { s.announce(now, 3) })
	if len(at) > 5 {
		t.Fatalf("%d sends in 5 s of payload churn: %v", len(at), at)
	}
}

func TestAnswerMergesIntoPendingAnnouncement(t *testing.T) {
	var s sender
	s.announce(t0, 1)
	if s.answer(t0, 50*time.Millisecond) {
		t.Fatal("a query answered by an announcement already due scheduled a send of its own")
	}
	s.sent(t0)
	if !s.answer(t0.Add(10*time.Millisecond), 50*time.Millisecond) {
		t.Fatal("a query after the announcement scheduled nothing")
	}
	if got := s.next(); !got.Equal(t0.Add(time.Second)) {
		t.Fatalf("answer due at %v, want 1 s after the announcement", got.Sub(t0))
	}
}

func TestFailedSendsRetry(t *testing.T) {
	q := newQuerySchedule(t0, 0, time.Second, time.Minute)
	q.failed(t0)
	q.failed(t0.Add(time.Second))
	if !q.next.Equal(t0.Add(2*time.Second)) || q.wait != time.Second {
		t.Fatalf("after failures: next %v wait %v", q.next.Sub(t0), q.wait)
	}
	var s sender
	s.announce(t0, 2)
	s.failed(t0)
	if got := s.next(); !got.Equal(t0.Add(time.Second)) {
		t.Fatalf("failed announcement retried at %v, want 1 s later", got.Sub(t0))
	}
	s.sent(t0.Add(time.Second))
	s.sent(t0.Add(2 * time.Second))
	if !s.next().IsZero() {
		t.Fatal("announcements left after two sent")
	}
	// A link that never works stops retrying: the schedules move on.
	s.announce(t0, 1)
	q = newQuerySchedule(t0, 0, time.Second, time.Minute)
	for i := range maxRetries + 1 {
		now := t0.Add(time.Duration(i) * time.Second)
		s.failed(now)
		q.failed(now)
	}
	if !s.next().IsZero() || q.wait != 2*time.Second {
		t.Fatalf("after %d failures: announcement at %v, query wait %v", maxRetries+1, s.next(), q.wait)
	}
}

package admit

// Making room among inbound sessions: the trim at the high watermark, which closes the
// oldest sessions that hold nothing, and the idle check, which closes an inbound session
// on which no protocol was ever opened within IdleTimeout. The ledger decides which and
// when; the caller knows whether a session is busy or protected, and closes it.

import (
	"slices"
	"time"
)

// StartTrim reports how many inbound sessions a trim must close to bring them down to
// the low watermark: none while they are below the high one, when trimming is off, or
// while another trim runs. A positive answer starts a trim, which EndTrim ends.
func (l *Ledger) StartTrim() int {
	if l.lim.HighWater <= 0 || l.inbound < l.lim.HighWater || l.trimming {
		return 0
	}
	l.trimming = true
	return l.inbound - l.lim.LowWater
}

// EndTrim ends the trim StartTrim started.
func (l *Ledger) EndTrim() { l.trimming = false }

// Candidate is an inbound session as a trim sees it.
type Candidate struct {
	Opened time.Time // when it was established
	Busy   bool      // a protocol stream is open or opening on it
}

// Victims returns the indices in cands of the sessions a trim at now closes: up to need
// of them, oldest first, never one still in its grace period, a busy one, or one that
// protected (asked only of sessions that would otherwise be picked, in that order)
// keeps. cands is not reordered. Victims reads only the ledger's limits, which never
// change, so it may run without the caller's lock (the caller asks the application's
// Protect meanwhile).
func (l *Ledger) Victims(now time.Time, cands []Candidate, need int, protected func(i int) bool) []int {
	order := make([]int, len(cands))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(x, y int) int { return cands[x].Opened.Compare(cands[y].Opened) })
	young := now
	if l.lim.GracePeriod > 0 {
		young = now.Add(-l.lim.GracePeriod)
	}
	var victims []int
	for _, i := range order {
		if len(victims) >= need || cands[i].Opened.After(young) {
			break // the rest are younger still
		}
		if cands[i].Busy || (protected != nil && protected(i)) {
			continue
		}
		victims = append(victims, i)
	}
	return victims
}

// idleCheck is an inbound session's idle check, due at at.
type idleCheck struct {
	session uint64
	at      time.Time
}

// QueueIdle queues the idle check of t's session (an inbound one, counted), due
// IdleTimeout after it opened. It returns the time the caller's timer must fire at and
// whether the timer must be armed for it now: it is not armed, or armed for a later check.
func (l *Ledger) QueueIdle(t *Ticket, session uint64, opened time.Time) (at time.Time, arm bool) {
	d := l.lim.IdleTimeout
	if d <= 0 || !t.inbound || !t.counted || t.idle {
		return time.Time{}, false
	}
	t.session, t.idle = session, true
	at = opened.Add(d)
	i, _ := slices.BinarySearchFunc(l.idle, at, func(c idleCheck, at time.Time) int {
		if c.at.After(at) {
			return 1 // after every check due at the same time: first in, first out
		}
		return -1
	})
	l.idle = slices.Insert(l.idle, i, idleCheck{session: session, at: at})
	if !l.idleArmed || i == 0 {
		l.idleArmed = true
		return at, true
	}
	return at, false
}

// DueIdle takes the idle checks due at now and returns their sessions, and the time the
// next check is due at, if any (more): the caller re-arms its timer for it. Without more,
// the timer is left unarmed and the next QueueIdle arms it.
func (l *Ledger) DueIdle(now time.Time) (due []uint64, next time.Time, more bool) {
	n := 0
	for n < len(l.idle) && !l.idle[n].at.After(now) {
		due = append(due, l.idle[n].session)
		n++
	}
	l.idle = slices.Delete(l.idle, 0, n)
	l.idleArmed = len(l.idle) > 0
	if l.idleArmed {
		return due, l.idle[0].at, true
	}
	return due, time.Time{}, false
}

package admit

import (
	"slices"
	"testing"
	"time"
)

// sessions admits n inbound sessions from distinct subnets.
func sessions(t *testing.T, l *Ledger, n int) []Ticket {
	t.Helper()
	var tks []Ticket
	for i := range n {
		tk, _ := mustAdmit(t, l, t0, v4(byte(i), 0, 1), false)
		if k := l.AdmitSession(&tk); k != None {
			t.Fatal(k)
		}
		tks = append(tks, tk)
	}
	return tks
}

// TestStartTrim: a trim starts when inbound sessions reach the high watermark and asks for
// enough victims to reach the low one; only one runs at a time; HighWater <= 0 turns it off.
func TestStartTrim(t *testing.T) {
	l := New(testLimits()) // high 6, low 4
	tks := sessions(t, l, 5)
	if n := l.StartTrim(); n != 0 {
		t.Fatalf("below the high watermark: %d", n)
	}
	tks = append(tks, sessions(t, l, 1)...)
	if n := l.StartTrim(); n != 2 {
		t.Fatalf("at the high watermark: need %d, want 2", n)
	}
	if n := l.StartTrim(); n != 0 {
		t.Fatalf("a second trim while one runs: %d", n)
	}
	l.Release(&tks[0])
	l.Release(&tks[1])
	l.EndTrim()
	if n := l.StartTrim(); n != 0 {
		t.Fatalf("after the trim: %d", n)
	}
	lim := testLimits()
	lim.HighWater = -1
	l = New(lim)
	sessions(t, l, 6)
	if n := l.StartTrim(); n != 0 {
		t.Fatalf("trimming off: %d", n)
	}
}

// TestVictims: oldest first, never one in its grace period, busy or protected; protected
// is asked only of sessions that would otherwise go, oldest first; at most need; the
// candidates are not reordered.
func TestVictims(t *testing.T) {
	l := New(testLimits()) // grace 1 s
	now := at(time.Minute)
	cands := []Candidate{
		{Opened: at(5 * time.Second)},              // 0
		{Opened: at(1 * time.Second), Busy: true},  // 1: oldest, busy
		{Opened: at(3 * time.Second)},              // 2: protected
		{Opened: at(2 * time.Second)},              // 3
		{Opened: now.Add(-500 * time.Millisecond)}, // 4: in its grace period
		{Opened: at(4 * time.Second)},              // 5
		{Opened: now.Add(-time.Second)},            // 6: just past it
	}
	orig := slices.Clone(cands)
	var asked []int
	protect := func(i int) bool {
		asked = append(asked, i)
		return i == 2
	}
	got := l.Victims(now, cands, 3, protect)
	if want := []int{3, 5, 0}; !slices.Equal(got, want) {
		t.Fatalf("victims %v, want %v", got, want)
	}
	if want := []int{3, 2, 5, 0}; !slices.Equal(asked, want) {
		t.Fatalf("protect asked of %v, want %v", asked, want)
	}
	if !slices.Equal(cands, orig) {
		t.Fatal("candidates reordered")
	}
	if got := l.Victims(now, cands, 10, nil); !slices.Equal(got, []int{3, 2, 5, 0, 6}) {
		t.Fatalf("all that may go: %v", got)
	}
	lim := testLimits()
	lim.GracePeriod = -1
	if got := New(lim).Victims(now, cands, 10, nil); !slices.Equal(got, []int{3, 2, 5, 0, 6, 4}) {
		t.Fatalf("no grace period: %v", got)
	}
}

// TestIdleChecks: one timer for all: the first check arms it, later ones do not unless due
// sooner; due checks come out in order with the next one's time; a released session's
// check is dropped at once, so the queue never holds more than the inbound sessions.
func TestIdleChecks(t *testing.T) {
	l := New(testLimits()) // idle timeout 30 s
	tks := sessions(t, l, 4)
	when, arm := l.QueueIdle(&tks[0], 1, at(10*time.Second))
	if !arm || !when.Equal(at(40*time.Second)) {
		t.Fatalf("first check: %v, arm %v", when.Sub(t0), arm)
	}
	if _, arm := l.QueueIdle(&tks[1], 2, at(11*time.Second)); arm {
		t.Fatal("a later check re-armed the timer")
	}
	if _, arm := l.QueueIdle(&tks[1], 2, at(11*time.Second)); arm || len(l.idle) != 2 {
		t.Fatal("a session queued twice")
	}
	if when, arm := l.QueueIdle(&tks[2], 3, at(5*time.Second)); !arm || !when.Equal(at(35*time.Second)) {
		t.Fatal("a sooner check did not re-arm the timer")
	}
	l.QueueIdle(&tks[3], 4, at(11*time.Second))
	out := Ticket{}
	if _, arm := l.QueueIdle(&out, 9, t0); arm || len(l.idle) != 4 {
		t.Fatal("an outbound or uncounted session queued")
	}
	l.Release(&tks[0]) // closed before its check: dropped now
	if len(l.idle) != 3 {
		t.Fatalf("%d checks queued after a release, want 3", len(l.idle))
	}
	due, next, more := l.DueIdle(at(40 * time.Second))
	if !slices.Equal(due, []uint64{3}) || !more || !next.Equal(at(41*time.Second)) {
		t.Fatalf("at 40 s: due %v, next %v, more %v", due, next.Sub(t0), more)
	}
	due, _, more = l.DueIdle(at(41 * time.Second))
	if !slices.Equal(due, []uint64{2, 4}) || more {
		t.Fatalf("at 41 s: due %v (first in, first out), more %v", due, more)
	}
	if when, arm := l.QueueIdle(&Ticket{inbound: true, counted: true}, 5, at(50*time.Second)); !arm || !when.Equal(at(80*time.Second)) {
		t.Fatal("the timer was not re-armed once the queue had emptied")
	}
	lim := testLimits()
	lim.IdleTimeout = -1
	if _, arm := New(lim).QueueIdle(&Ticket{inbound: true, counted: true}, 2, t0); arm {
		t.Fatal("idle checks off, yet queued")
	}
}

package identify

import (
	"errors"
	"time"

	"github.com/tendril-p2p/tendril"
)

// run is identify's one goroutine: it turns the Service's listen and protocol events (and
// Update) into a refresh PushDelay later, so that a burst of changes makes one new state,
// and pushes each state to every peer as fast as pushRate lets it. It ends with Close or
// when the Service closes (its subscription's channel closes).
func (i *Identify) run() {
	defer close(i.loopDone)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	var due time.Time   // when timer fires; zero: not armed
	var refreshDue bool // a change is waiting for the timer
	schedule := func(t time.Time) {
		if due.IsZero() || t.Before(due) {
			due = t
			timer.Reset(time.Until(t))
		}
	}
	changed := func() {
		refreshDue = true
		schedule(time.Now().Add(i.cfg.PushDelay))
	}
	for {
		select {
		case <-i.quit:
			return
		case ev, ok := <-i.sub.C():
			if !ok {
				return
			}
			switch ev.Type {
			case tendril.EventListenStarted, tendril.EventListenClosed,
				tendril.EventProtocolAdded, tendril.EventProtocolRemoved:
				changed()
			case tendril.EventSessionClosed:
				i.mu.Lock()
				i.sweepLocked()
				i.mu.Unlock()
			}
		case <-i.kick:
			changed()
		case <-timer.C:
			due = time.Time{}
			now := time.Now()
			if refreshDue {
				refreshDue = false
				i.refresh(now)
			}
			if next := i.push(now); !next.IsZero() {
				schedule(next)
			}
		}
	}
}

// push sends the current state to every peer that has not had it and whose push bucket
// allows, and returns when the next of the others may be sent (zero if none waits).
func (i *Identify) push(now time.Time) time.Time {
	type out struct {
		sess *tendril.Session
		c    *tendril.Context
		msg  []byte
	}
	var outs []out
	var next time.Time
	i.mu.Lock()
	for sess, p := range i.peers {
		if p.c == nil || p.err != nil || p.sentGen == i.local.gen {
			continue
		}
		if !p.push.Allow(now, i.pushRate) {
			if t := p.push.Next(i.pushRate); next.IsZero() || t.Before(next) {
				next = t
			}
			continue
		}
		p.sentGen = i.local.gen
		outs = append(outs, out{sess, p.c, i.messageLocked(sess)})
	}
	i.mu.Unlock()
	for _, o := range outs {
		i.send(o.sess, o.c, o.msg)
	}
	return next
}

// send queues msg on the stream without waiting. If the session's queue is full, the
// peer is marked as owed the state and a retry scheduled (paced by its push bucket).
func (i *Identify) send(sess *tendril.Session, c *tendril.Context, msg []byte) {
	err := c.Send(msg)
	if err == nil {
		i.stats.sent.Add(1)
		return
	}
	i.cfg.Logger.Debug("identify: send failed", "peer", sess.Peer(), "err", err)
	i.mu.Lock()
	if p := i.peers[sess]; p != nil && p.c == c {
		p.sentGen = 0
	}
	i.mu.Unlock()
	if errors.Is(err, tendril.ErrSessionBlocked) {
		i.Update()
	}
}

package tendril

import "sync/atomic"

// DefaultSubscriptionBuffer is the capacity of a Subscription's channel when Subscribe is
// given none.
const DefaultSubscriptionBuffer = 256

// Subscription receives a copy of every event the Service reports, on a channel of its own.
// It is the hook for code that runs beside the application on the same Service (identify,
// discovery, keeping peers connected, or a user's own protocol): each reads its own
// subscription, so none takes events from Events or from another.
//
// A Subscription has the delivery rules of Service.Events: it never slows the Service;
// events that find its channel full are dropped and counted (Dropped), lifecycle events
// (listen started and closed, session opened and closed, protocol added and removed) may
// fill the whole buffer and all others only half of it, and failures a peer can provoke
// are coalesced. A subscriber that must not miss a session therefore still reconciles
// with Service.Sessions from time to time, or whenever Dropped grows.
type Subscription struct {
	s       *Service
	ch      chan Event // closed by Close or when the Service closes; guarded by s.eventsMu
	closed  bool       // guarded by s.eventsMu
	dropped atomic.Uint64
}

// Subscribe returns a new Subscription whose channel holds buffer events (zero or less:
// DefaultSubscriptionBuffer). It receives the events reported from now on. After the
// Service has closed, the subscription's channel is closed at once.
func (s *Service) Subscribe(buffer int) *Subscription {
	if buffer <= 0 {
		buffer = DefaultSubscriptionBuffer
	}
	sub := &Subscription{s: s, ch: make(chan Event, buffer)}
	s.eventsMu.Lock()
	defer s.eventsMu.Unlock()
	if s.eventsClosed {
		sub.closed = true
		close(sub.ch)
		return sub
	}
	if s.subs == nil {
		s.subs = make(map[*Subscription]struct{})
	}
	s.subs[sub] = struct{}{}
	return sub
}

// C returns the subscription's channel. It is closed by Close, and when the Service closes.
func (sub *Subscription) C() <-chan Event { return sub.ch }

// Dropped returns how many events were dropped because the channel was full.
func (sub *Subscription) Dropped() uint64 { return sub.dropped.Load() }

// Close ends the subscription and closes its channel; events still in it can be read.
// It is safe to call more than once.
func (sub *Subscription) Close() {
	s := sub.s
	s.eventsMu.Lock()
	defer s.eventsMu.Unlock()
	if sub.closed {
		return
	}
	sub.closed = true
	delete(s.subs, sub)
	close(sub.ch)
}

// deliver puts e on ch without blocking, under the lifecycle rule of Service.Events, and
// reports whether it fitted.
func deliver(ch chan Event, e Event) bool {
	if !e.Type.lifecycle() && len(ch) >= max(cap(ch)/2, 1) {
		return false
	}
	select {
	case ch <- e:
		return true
	default:
		return false
	}
}

// closeSubscriptionsLocked closes every subscription's channel; s.eventsMu is held for
// writing and the Service is closing.
func (s *Service) closeSubscriptionsLocked() {
	for sub := range s.subs {
		sub.closed = true
		close(sub.ch)
	}
	clear(s.subs)
}

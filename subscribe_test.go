package tendril

import (
	"slices"
	"testing"
	"time"
)

// recv returns the next event on ch of type typ, skipping others, or fails the test.
func recv(t *testing.T, ch <-chan Event, typ EventType) Event {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case e, ok := <-ch:
			if !ok {
				t.Fatalf("channel closed while waiting for %s", typ)
			}
			if e.Type == typ {
				return e
			}
		case <-deadline:
			t.Fatalf("no %s within 5 s", typ)
		}
	}
}

// TestSubscriptionsEachGetEveryEvent: two subscriptions and Events each see the same
// session open; a closed subscription's channel closes and the others go on; Close of the
// Service closes what is left, and a subscription taken afterwards is closed at once.
func TestSubscriptionsEachGetEveryEvent(t *testing.T) {
	checkNoLeaks(t)
	a := newService(t, Config{})
	b := newService(t, Config{})
	s1, s2 := a.Subscribe(0), a.Subscribe(8)
	sess := dial(t, a, listen(t, b))
	for _, ch := range []<-chan Event{a.Events(), s1.C(), s2.C()} {
		if e := recv(t, ch, EventSessionOpened); e.Peer != b.ID() {
			t.Fatalf("session opened with %s, want %s", e.Peer, b.ID())
		}
	}
	s1.Close()
	s1.Close()
	if _, ok := <-s1.C(); ok {
		t.Fatal("closed subscription delivered an event")
	}
	sess.Close()
	recv(t, s2.C(), EventSessionClosed)
	a.Close()
	for range s2.C() {
	}
	late := a.Subscribe(1)
	if _, ok := <-late.C(); ok {
		t.Fatal("subscription taken after Close delivered an event")
	}
	late.Close()
}

// TestSubscriptionFullDropsWithoutBlocking: a subscription nobody reads fills, counts what
// it drops, and the Service and the other readers go on.
func TestSubscriptionFullDropsWithoutBlocking(t *testing.T) {
	checkNoLeaks(t)
	a := newService(t, Config{})
	stuck := a.Subscribe(1)
	live := a.Subscribe(64)
	for range 5 {
		if err := a.AddProtocol(Protocol{Name: "/p", Versions: []string{"1"}}); err != nil {
			t.Fatal(err)
		}
		if err := a.RemoveProtocol("/p"); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 10 {
		want := EventProtocolAdded
		if i%2 == 1 {
			want = EventProtocolRemoved
		}
		if e := recv(t, live.C(), want); e.Protocol != "/p" {
			t.Fatalf("event %d: %s %q, want %s /p", i, e.Type, e.Protocol, want)
		}
	}
	if got := stuck.Dropped(); got != 9 {
		t.Fatalf("full subscription dropped %d events, want 9", got)
	}
	if live.Dropped() != 0 {
		t.Fatalf("live subscription dropped %d", live.Dropped())
	}
}

// TestProtocolsListsRegistered: Protocols reports the registered protocols in order, with
// their versions, as copies.
func TestProtocolsListsRegistered(t *testing.T) {
	a := newService(t, Config{Protocols: []Protocol{{Name: "/a", Versions: []string{"1", "2"}}}})
	if err := a.AddProtocol(Protocol{Name: "/b", Versions: []string{"3"}}); err != nil {
		t.Fatal(err)
	}
	ps := a.Protocols()
	var names []string
	for _, p := range ps {
		names = append(names, p.Name)
	}
	if !slices.Equal(names, []string{"/a", "/b"}) || !slices.Equal(ps[0].Versions, []string{"1", "2"}) {
		t.Fatalf("Protocols() = %+v", ps)
	}
	ps[0].Versions[0] = "x"
	if a.Protocols()[0].Versions[0] != "1" {
		t.Fatal("Protocols returned the Service's own slice")
	}
	if err := a.RemoveProtocol("/a"); err != nil {
		t.Fatal(err)
	}
	if ps := a.Protocols(); len(ps) != 1 || ps[0].Name != "/b" {
		t.Fatalf("after RemoveProtocol: %+v", ps)
	}
}

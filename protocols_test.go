package tendril

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/tendril-p2p/tendril/protocol"
)

// TestAddRemoveProtocol: a protocol added while sessions run can be opened from both sides;
// once removed, the peer's open is refused with a typed error, so is this node's, and the
// streams it had open are closed (Disconnected on both ends).
func TestAddRemoveProtocol(t *testing.T) {
	boxA, boxB := newInbox(), newInbox()
	a := newService(t, Config{Protocols: []Protocol{echoProto("/late", boxA)}})
	b := newService(t, Config{})
	sess := dial(t, a, listen(t, b))
	if err := sess.OpenProtocol(context.Background(), "/late"); !errors.Is(err, protocol.ErrUnknownProtocol) {
		t.Fatalf("open before AddProtocol: %v, want protocol.ErrUnknownProtocol", err)
	}
	if err := b.AddProtocol(echoProto("/late", boxB)); err != nil {
		t.Fatal(err)
	}
	if err := sess.OpenProtocol(context.Background(), "/late"); err != nil {
		t.Fatalf("open after AddProtocol: %v", err)
	}
	if err := sess.Send("/late", []byte("hi")); err != nil {
		t.Fatal(err)
	}
	boxB.waitFor(t, "the message", func() bool { return len(boxB.msgs) == 1 })

	if err := b.RemoveProtocol("/late"); err != nil {
		t.Fatal(err)
	}
	boxA.waitFor(t, "Disconnected on the opener", func() bool { return boxA.gone == 1 })
	boxB.waitFor(t, "Disconnected on the remover", func() bool { return boxB.gone == 1 })
	if err := sess.OpenProtocol(context.Background(), "/late"); !errors.Is(err, protocol.ErrUnknownProtocol) {
		t.Errorf("the peer's open after RemoveProtocol: %v, want protocol.ErrUnknownProtocol", err)
	}
	if err := b.OpenProtocol(context.Background(), a.ID(), "/late"); !errors.Is(err, ErrUnknownProtocol) {
		t.Errorf("own open after RemoveProtocol: %v, want ErrUnknownProtocol", err)
	}
	if err := b.RemoveProtocol("/late"); !errors.Is(err, ErrUnknownProtocol) {
		t.Errorf("removing twice: %v, want ErrUnknownProtocol", err)
	}
}

// TestAddProtocolInvalid: AddProtocol refuses what New refuses, with typed errors.
func TestAddProtocolInvalid(t *testing.T) {
	s := newService(t, Config{Protocols: []Protocol{echoProto("/dup", newInbox())}})
	for _, tc := range []struct {
		p     Protocol
		cause error
	}{
		{echoProto("/dup", newInbox()), protocol.ErrDuplicateProtocol},
		{echoProto("no-slash", newInbox()), protocol.ErrInvalidName},
		{Protocol{Name: "/two", Versions: []string{"1.0"}, Handler: newInbox(), StreamHandler: echoRawProto.StreamHandler}, nil},
		{Protocol{Name: "/none", Versions: []string{"1.0"}, OpenOnConnect: true}, nil},
	} {
		err := s.AddProtocol(tc.p)
		if !errors.Is(err, ErrInvalidProtocol) || tc.cause != nil && !errors.Is(err, tc.cause) {
			t.Errorf("AddProtocol(%q): %v, want ErrInvalidProtocol and %v", tc.p.Name, err, tc.cause)
		}
	}
	if _, err := New(Config{Protocols: []Protocol{{Name: "/x"}}}); !errors.Is(err, ErrInvalidConfig) || !errors.Is(err, ErrInvalidProtocol) {
		t.Errorf("New with an invalid protocol: %v", err)
	}
}

// TestAddRemoveProtocolConcurrent: adding and removing protocols while a session opens and
// uses them is race-free (run with -race) and leaves nothing behind (goleak).
func TestAddRemoveProtocolConcurrent(t *testing.T) {
	a := newService(t, Config{Protocols: []Protocol{echoProto("/churn", newInbox())}})
	b := newService(t, Config{})
	sess := dial(t, a, listen(t, b))
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for range 50 {
			if err := b.AddProtocol(echoProto("/churn", newInbox())); err != nil {
				t.Error(err)
				return
			}
			if err := b.RemoveProtocol("/churn"); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	go func() {
		defer wg.Done()
		for range 50 {
			if err := sess.OpenProtocol(context.Background(), "/churn"); err == nil {
				_ = sess.Send("/churn", []byte("x"))
			}
		}
	}()
	wg.Wait()
}

package tendril

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tendril-p2p/tendril/secio"
)

// TestGarbageNegotiationsKeepLifecycleEvents: one peer makes 10,000 garbage negotiations
// while 100 other sessions open and close, and the application reads events slowly
// (1 ms each): every lifecycle event of the 100 arrives; the failures arrive coalesced,
// with their count.
func TestGarbageNegotiationsKeepLifecycleEvents(t *testing.T) {
	checkNoLeaks(t)
	srv := newService(t, Config{Protocols: []Protocol{echoProto("/e", newInbox())}})
	addr := listen(t, srv)
	var (
		mu                       sync.Mutex
		opened, closed, failures = map[secio.PeerID]bool{}, map[secio.PeerID]bool{}, 0
		failureEvents            = 0
		readerDone               = make(chan struct{})
	)
	go func() {
		defer close(readerDone)
		for e := range srv.Events() {
			mu.Lock()
			switch e.Type {
			case EventSessionOpened:
				opened[e.Peer] = true
			case EventSessionClosed:
				closed[e.Peer] = true
			case EventNegotiationFailed:
				failures += e.Count
				failureEvents++
			}
			mu.Unlock()
			time.Sleep(time.Millisecond)
		}
	}()
	hostile := handshakeRaw(t, addr)
	hostile.startMux(t)
	const garbage = 10000
	var wg sync.WaitGroup
	var next atomic.Int64
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= garbage {
				st, err := hostile.ms.OpenStream(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				st.Write(negRequest("/x", "1")) // unknown protocol
				buf := make([]byte, 64)
				st.SetReadDeadline(time.Now().Add(10 * time.Second))
				st.Read(buf) // the refusal
				st.Close()
			}
		}()
	}
	var ids []secio.PeerID
	for range 100 {
		c := newService(t, Config{EventBuffer: 4})
		ids = append(ids, c.ID())
		sess := dial(t, c, addr)
		if err := sess.Close(); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	waitUntil(t, "lifecycle events of 100 sessions", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, id := range ids {
			if !opened[id] || !closed[id] {
				return false
			}
		}
		return true
	})
	// Every failure is accounted for, coalesced: none was dropped.
	waitUntil(t, "coalesced failures", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return failures >= garbage
	})
	mu.Lock()
	t.Logf("negotiation failures: %d (of %d) reported in %d events; dropped events: %d", failures, garbage, failureEvents, srv.DroppedEvents())
	mu.Unlock()
	srv.Close()
	<-readerDone
}

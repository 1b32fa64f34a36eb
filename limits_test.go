package tendril

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/tendril-p2p/tendril/mux"
)

// TestMaxStreams checks both ends of the stream limit: a node refuses the peer's streams
// beyond its own MaxStreams (the opener sees an error, nothing is queued), and refuses to
// open more than its own MaxStreams (ErrTooManyStreams, with an event).
func TestMaxStreams(t *testing.T) {
	hold := StreamHandlerFunc(func(ctx *Context, _ string, st net.Conn) {
		<-ctx.Done() // keep the stream open until the session ends
	})
	proto := Protocol{Name: "/hold", Versions: []string{"1"}, StreamHandler: hold}
	small := mux.DefaultConfig()
	small.MaxStreams = 4
	server := newService(t, Config{Protocols: []Protocol{proto}, Mux: small})
	big := mux.DefaultConfig()
	big.MaxStreams = 64
	client := newService(t, Config{Protocols: []Protocol{proto}, Mux: big})
	sess, err := client.Dial(context.Background(), listen(t, server))
	if err != nil {
		t.Fatal(err)
	}
	var open []net.Conn
	defer func() {
		for _, st := range open {
			st.Close()
		}
	}()
	// A protocol with one version is negotiated lazily: a refusal is the first Read's error.
	refusedAt := func(st net.Conn) bool {
		st.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		_, err := st.Read(make([]byte, 1))
		st.SetReadDeadline(time.Time{})
		return errors.Is(err, mux.ErrStreamReset)
	}
	refused := 0
	for range 12 {
		st, _, err := sess.OpenStream(context.Background(), "/hold")
		if err != nil || refusedAt(st) {
			refused++
			continue
		}
		open = append(open, st)
	}
	if len(open) > 4 || refused < 8 {
		t.Fatalf("server with MaxStreams 4 let %d streams open (%d refused)", len(open), refused)
	}
	// The session itself survives the refusals.
	if st, _, err := sess.OpenStream(context.Background(), "/hold"); err == nil && !refusedAt(st) {
		t.Fatal("a fifth stream was accepted")
	}
	select {
	case <-sess.Done():
		t.Fatalf("session closed by refused streams: %v", sess.Err())
	default:
	}

	// Locally: a node does not open more than its own limit.
	tiny := mux.DefaultConfig()
	tiny.MaxStreams = 2
	opener := newService(t, Config{Protocols: []Protocol{proto}, Mux: tiny})
	s2, err := opener.Dial(context.Background(), listen(t, newService(t, Config{Protocols: []Protocol{proto}})))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		st, _, err := s2.OpenStream(context.Background(), "/hold")
		if err != nil {
			t.Fatalf("stream %d within the limit: %v", i, err)
		}
		defer st.Close()
	}
	if _, _, err := s2.OpenStream(context.Background(), "/hold"); !errors.Is(err, mux.ErrTooManyStreams) {
		t.Fatalf("third stream over a local limit of 2: %v", err)
	}
	if !waitEvent(t, opener, EventLimitReached) {
		t.Fatal("no limit-reached event for the local stream limit")
	}
}

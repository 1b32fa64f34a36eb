package tendril

import (
	"errors"
	"testing"
	"time"

	"github.com/tendril-p2p/tendril/mux"
)

func TestKeepAliveClosesSilentPeer(t *testing.T) {
	needTCP(t)
	muxCfg := mux.DefaultConfig()
	muxCfg.KeepAliveInterval = 100 * time.Millisecond
	muxCfg.ConnectionWriteTimeout = 300 * time.Millisecond
	a := newService(t, Config{Mux: muxCfg})
	b := newService(t, Config{})
	addr := listen(t, b)
	_, hostport, _ := addr.hostPort()
	proxy := newTapProxy(t, hostport)
	pa := proxy.addr().WithPeer(b.ID())
	sess := dial(t, a, pa)
	// While the peer answers, keepalives keep the session open.
	select {
	case <-sess.Done():
		t.Fatalf("session closed while the peer answered: %v", sess.Err())
	case <-time.After(500 * time.Millisecond):
	}
	proxy.freeze()
	select {
	case <-sess.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("session with a silent peer was never closed")
	}
	if err := sess.Err(); !errors.Is(err, ErrSessionClosed) {
		t.Fatalf("session closed with %v, want a keepalive failure", err)
	}
}

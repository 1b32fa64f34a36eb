package tendril

import (
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/tendril-p2p/tendril/mux"
)

// freezeProxy forwards one TCP connection until frozen, then forwards nothing more in either
// direction while keeping both sockets open: a peer that has silently gone away.
type freezeProxy struct {
	ln     net.Listener
	frozen chan struct{}
	once   sync.Once
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  []net.Conn
}

func newFreezeProxy(t *testing.T, target string) *freezeProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &freezeProxy{ln: ln, frozen: make(chan struct{})}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		in, err := ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", target)
		if err != nil {
			in.Close()
			return
		}
		p.mu.Lock()
		p.conns = append(p.conns, in, out)
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(in, out)
		go p.pipe(out, in)
	}()
	t.Cleanup(p.close)
	return p
}

func (p *freezeProxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		select {
		case <-p.frozen:
			return // drop this and everything after
		default:
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *freezeProxy) freeze() { p.once.Do(func() { close(p.frozen) }) }

func (p *freezeProxy) close() {
	p.freeze()
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func TestKeepAliveClosesSilentPeer(t *testing.T) {
	muxCfg := mux.DefaultConfig()
	muxCfg.KeepAliveInterval = 100 * time.Millisecond
	muxCfg.ConnectionWriteTimeout = 300 * time.Millisecond
	a := newService(t, Config{Mux: muxCfg})
	b := newService(t, Config{})
	addr := listen(t, b)
	_, hostport, _ := addr.hostPort()
	proxy := newFreezeProxy(t, hostport)
	pa := MustParseAddr("/ip4/127.0.0.1/tcp/" + portOf(t, proxy.ln.Addr())).WithPeer(b.ID())
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

func portOf(t *testing.T, a net.Addr) string {
	_, port, err := net.SplitHostPort(a.String())
	if err != nil {
		t.Fatal(err)
	}
	return port
}

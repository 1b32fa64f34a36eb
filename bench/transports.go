package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/yamux"
	lpcrypto "github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/sec"
	"github.com/libp2p/go-libp2p/core/transport"
	lpyamux "github.com/libp2p/go-libp2p/p2p/muxer/yamux"
	"github.com/libp2p/go-libp2p/p2p/net/upgrader"
	"github.com/libp2p/go-libp2p/p2p/security/noise"
	libp2ptls "github.com/libp2p/go-libp2p/p2p/security/tls"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"

	"github.com/tendril-p2p/tendril"
	"github.com/tendril-p2p/tendril/cipher/aead"
	"github.com/tendril-p2p/tendril/internal/loopback"
	tpt "github.com/tendril-p2p/tendril/transport"
)

// streamWindow is the fixed stream window of the hashicorp/yamux transports: tendril's own
// fixed window before its mux grew windows with the round trip (hashicorp/yamux cannot; a
// window as large as the 32 MiB tendril may grow to would be what every stream could be
// made to hold).
var streamWindow uint32 = 1 << 20

// A stream is one bidirectional byte stream: a multiplexed stream, or a whole
// connection for the transports without a multiplexer.
type stream interface {
	io.ReadWriter
	// CloseWrite sends end-of-stream and keeps the read side open.
	CloseWrite() error
	Close() error
}

// A conn is the client end of one connection.
type conn interface {
	OpenStream(ctx context.Context) (stream, error)
	Close() error
}

// A server accepts connections on loopback and serves every stream with
// serveStream. Dial connects a new client to it.
type server interface {
	Dial(ctx context.Context) (conn, error)
	// Conns reports how many connections the server side has established.
	Conns() int
	Close() error
}

// A routable server can be dialled through another address: the WAN mode puts a delay
// proxy between its clients and its listener.
type routable interface {
	server
	// ListenAddr is the host:port the server listens on.
	ListenAddr() string
	// Route makes every later Dial connect to hostport instead ("" dials the listener).
	Route(hostport string) error
}

// A transportSpec names a transport and starts its server.
type transportSpec struct {
	Name string
	// Muxed is false for the transports whose "streams" are connections.
	Muxed bool
	Start func(ctx context.Context) (server, error)
}

// transports returns every transport compared, tendril first.
func transports() []transportSpec {
	return []transportSpec{
		{"tendril AES-128-GCM", true, func(ctx context.Context) (server, error) { return startTendril(ctx, aead.AES128GCM, tcpListen) }},
		{"tendril ChaCha20-Poly1305", true, func(ctx context.Context) (server, error) { return startTendril(ctx, aead.ChaCha20Poly1305, tcpListen) }},
		{"tendril over WebSocket", true, func(ctx context.Context) (server, error) { return startTendril(ctx, aead.AES128GCM, wsListen) }},
		{"crypto/tls 1.3 + yamux", true, func(ctx context.Context) (server, error) { return startStd(ctx, true, true) }},
		{"go-libp2p Noise + yamux", true, func(ctx context.Context) (server, error) { return startLibp2p(ctx, "noise") }},
		{"go-libp2p TLS + yamux", true, func(ctx context.Context) (server, error) { return startLibp2p(ctx, "tls") }},
		{"tendril mux over TCP (no crypto)", true, startMuxTCP},
		{"yamux over TCP (no crypto)", true, func(ctx context.Context) (server, error) { return startStd(ctx, false, true) }},
		{"crypto/tls 1.3 (no mux)", false, func(ctx context.Context) (server, error) { return startStd(ctx, true, false) }},
		{"TCP (no crypto, no mux)", false, func(ctx context.Context) (server, error) { return startStd(ctx, false, false) }},
	}
}

// resetOnClose makes a TCP connection close with a reset (SO_LINGER 0), as
// go-libp2p does for all its TCP connections, so that no socket waits in
// TIME_WAIT.
func resetOnClose(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
}

// ---- tendril: the Service, one raw-mode protocol ----

const benchProtocol = "/tendril-bench"

type tendrilServer struct {
	suite   aead.Suite
	srv     *tendril.Service
	addr    tendril.Addr
	dialTo  tendril.Addr // where Dial connects: addr, or a proxy in front of it
	mu      sync.Mutex
	clients []*tendril.Service // idle client Services, each a distinct peer
	all     []*tendril.Service
}

func tendrilConfig(suite aead.Suite) tendril.Config {
	return tendril.Config{
		Ciphers:        []aead.Suite{suite},
		MaxConnections: 1 << 16,
		// Idle connections are what some benchmarks measure: admission must not close them.
		Admission:    tendril.Admission{IdleTimeout: -1},
		EventBuffer:  16,   // nobody reads the events here
		ResetOnClose: true, // every transport here closes with a reset, as go-libp2p does
		Protocols: []tendril.Protocol{{
			Name:     benchProtocol,
			Versions: []string{"1.0"},
			StreamHandler: tendril.StreamHandlerFunc(func(_ *tendril.Context, _ string, st net.Conn) {
				if s, ok := st.(stream); ok {
					serveStream(s)
				}
			}),
		}},
	}
}

// Where a tendril server listens: TCP, or WebSocket (AES-128-GCM inside either).
var (
	tcpListen = tendril.MustParseAddr("/ip4/127.0.0.1/tcp/0")
	wsListen  = tendril.MustParseAddr("/ip4/127.0.0.1/tcp/0/ws")
)

func startTendril(ctx context.Context, suite aead.Suite, at tendril.Addr) (server, error) {
	srv, err := tendril.New(tendrilConfig(suite))
	if err != nil {
		return nil, err
	}
	addr, err := srv.Listen(ctx, at)
	if err != nil {
		srv.Close()
		return nil, err
	}
	return &tendrilServer{suite: suite, srv: srv, addr: addr, dialTo: addr}, nil
}

// client returns a client Service whose peer has no session with the server:
// the Service keeps one session per peer, so every concurrent connection
// needs its own peer identity. Services are reused once their session ended
// on both sides.
func (t *tendrilServer) client() (*tendril.Service, error) {
	t.mu.Lock()
	for i, c := range t.clients {
		if t.srv.Session(c.ID()) == nil && len(c.Sessions()) == 0 {
			t.clients = append(t.clients[:i], t.clients[i+1:]...)
			t.mu.Unlock()
			return c, nil
		}
	}
	t.mu.Unlock()
	c, err := tendril.New(tendrilConfig(t.suite))
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	t.all = append(t.all, c)
	t.mu.Unlock()
	return c, nil
}

// Prepare creates n client Services up front, so that measurements of
// connections do not include creating them.
func (t *tendrilServer) Prepare(n int) error {
	var cs []*tendril.Service
	for range n {
		c, err := tendril.New(tendrilConfig(t.suite))
		if err != nil {
			return err
		}
		cs = append(cs, c)
	}
	t.mu.Lock()
	t.all = append(t.all, cs...)
	t.clients = append(t.clients, cs...)
	t.mu.Unlock()
	return nil
}

func (t *tendrilServer) Dial(ctx context.Context) (conn, error) {
	c, err := t.client()
	if err != nil {
		return nil, err
	}
	sess, err := c.Dial(ctx, t.dialTo)
	if err != nil {
		t.release(c)
		return nil, err
	}
	return &tendrilConn{t: t, svc: c, sess: sess}, nil
}

// ListenAddr implements routable.
func (t *tendrilServer) ListenAddr() string {
	_, hostport, _, ok := tpt.HostPort(t.addr.Transport)
	if !ok {
		return ""
	}
	return hostport
}

// Route implements routable.
func (t *tendrilServer) Route(hostport string) error {
	if hostport == "" {
		t.dialTo = t.addr
		return nil
	}
	a, err := hostPortAddr(hostport)
	if err != nil {
		return err
	}
	// The proxy carries TCP: what rides on it (/ws) stays as the server listens.
	_, _, above, _ := tpt.HostPort(t.addr.Transport)
	t.dialTo = tendril.Addr{Transport: a.Encapsulate(above), Peer: t.addr.Peer}
	return nil
}

// hostPortAddr turns a TCP host:port into a multiaddr.
func hostPortAddr(hostport string) (ma.Multiaddr, error) {
	na, err := net.ResolveTCPAddr("tcp", hostport)
	if err != nil {
		return nil, err
	}
	return manet.FromNetAddr(na)
}

func (t *tendrilServer) release(c *tendril.Service) {
	t.mu.Lock()
	t.clients = append(t.clients, c)
	t.mu.Unlock()
}

func (t *tendrilServer) Conns() int { return len(t.srv.Sessions()) }

func (t *tendrilServer) Close() error {
	t.mu.Lock()
	all := t.all
	t.all, t.clients = nil, nil
	t.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range all {
		wg.Go(func() { c.Close() })
	}
	wg.Wait()
	return t.srv.Close()
}

type tendrilConn struct {
	t    *tendrilServer
	svc  *tendril.Service
	sess *tendril.Session
}

func (c *tendrilConn) OpenStream(ctx context.Context) (stream, error) {
	st, _, err := c.sess.OpenStream(ctx, benchProtocol)
	if err != nil {
		return nil, err
	}
	s, ok := st.(stream)
	if !ok {
		st.Close()
		return nil, errors.New("bench: tendril stream has no CloseWrite")
	}
	return s, nil
}

func (c *tendrilConn) Close() error {
	err := c.sess.Close()
	c.t.release(c.svc)
	return err
}

// ---- crypto/tls, hashicorp/yamux and plain TCP from the standard library ----

type stdServer struct {
	serverBase
	ln       net.Listener
	dialTo   string // host:port Dial connects to: the listener's, or a proxy's
	tlsSrv   *tls.Config
	tlsCli   *tls.Config
	muxed    bool
	yamuxCfg *yamux.Config
}

// serverBase is what the servers built on a listener of their own (every transport but
// tendril's Service, which counts and closes its sessions itself) keep alike: the
// connections the server side holds, for Conns and for Close to end, and the goroutines
// Close waits for, so that no run leaks into the next.
type serverBase struct {
	conns atomic.Int64
	wg    sync.WaitGroup
	open  loopback.Set
}

// Conns implements server.
func (b *serverBase) Conns() int { return int(b.conns.Load()) }

// admit registers c as a connection (or session) the server side holds. Once Close has
// begun it closes c instead and reports false.
func (b *serverBase) admit(c io.Closer) bool {
	if !b.open.Track(c) {
		c.Close()
		return false
	}
	b.conns.Add(1)
	return true
}

// release undoes admit when the connection has ended.
func (b *serverBase) release(c io.Closer) {
	b.conns.Add(-1)
	b.open.Untrack(c)
}

// shutdown closes ln first, so that no connection is admitted behind it, then every
// connection held, which ends their goroutines, and waits for those.
func (b *serverBase) shutdown(ln io.Closer) error {
	err := ln.Close()
	b.open.CloseAll()
	b.wg.Wait()
	return err
}

// acceptLoop hands everything accept returns to handle, in turn, until accept fails: its
// listener or session has closed. It serves connections and streams alike.
func acceptLoop[T any](accept func() (T, error), handle func(T)) {
	for {
		x, err := accept()
		if err != nil {
			return
		}
		handle(x)
	}
}

func yamuxConfig() *yamux.Config {
	cfg := yamux.DefaultConfig()
	cfg.MaxStreamWindowSize = streamWindow
	cfg.LogOutput = io.Discard
	return cfg
}

func startStd(_ context.Context, useTLS, muxed bool) (server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &stdServer{ln: ln, dialTo: ln.Addr().String(), muxed: muxed, yamuxCfg: yamuxConfig()}
	if useTLS {
		s.tlsSrv, s.tlsCli, err = tlsConfigs()
		if err != nil {
			ln.Close()
			return nil, err
		}
	}
	s.wg.Go(s.accept)
	return s, nil
}

// tlsConfigs returns a server config with a fresh self-signed ECDSA P-256
// certificate and a client config that trusts it (and verifies it, as a
// client would). Everything else is crypto/tls's default: TLS 1.3 and its
// default key exchanges.
func tlsConfigs() (srv, cli *tls.Config, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "bench"},
		DNSNames:              []string{"bench"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	srv = &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert}},
		MinVersion:   tls.VersionTLS13,
	}
	cli = &tls.Config{RootCAs: pool, ServerName: "bench", MinVersion: tls.VersionTLS13}
	return srv, cli, nil
}

func (s *stdServer) accept() {
	acceptLoop(s.ln.Accept, func(c net.Conn) {
		resetOnClose(c)
		s.wg.Go(func() { s.serveConn(c) })
	})
}

func (s *stdServer) serveConn(c net.Conn) {
	if s.tlsSrv != nil {
		tc := tls.Server(c, s.tlsSrv)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := tc.HandshakeContext(ctx)
		cancel()
		if err != nil {
			c.Close()
			return
		}
		c = tc
	}
	if !s.muxed {
		if !s.admit(c) {
			return
		}
		serveStream(c.(stream))
		s.release(c)
		c.Close()
		return
	}
	sess, err := yamux.Server(c, s.yamuxCfg)
	if err != nil {
		c.Close()
		return
	}
	if !s.admit(sess) {
		return
	}
	defer s.release(sess)
	serveYamux(sess, &s.wg)
}

// serveYamux accepts streams until the session ends.
func serveYamux(sess *yamux.Session, wg *sync.WaitGroup) {
	defer sess.Close()
	acceptLoop(sess.AcceptStream, func(st *yamux.Stream) {
		wg.Go(func() {
			serveStream(yamuxStream{st})
			st.Close()
		})
	})
}

func (s *stdServer) Dial(ctx context.Context) (conn, error) {
	nc, err := s.dialOne(ctx)
	if err != nil {
		return nil, err
	}
	if !s.muxed {
		return &plainConn{s: s, first: nc.(stream)}, nil
	}
	sess, err := yamux.Client(nc, s.yamuxCfg)
	if err != nil {
		nc.Close()
		return nil, err
	}
	// Both ends of a peer-to-peer connection accept streams.
	s.wg.Go(func() { serveYamux(sess, &s.wg) })
	return yamuxConn{sess}, nil
}

func (s *stdServer) dialOne(ctx context.Context) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", s.dialTo)
	if err != nil {
		return nil, err
	}
	resetOnClose(c)
	if s.tlsCli == nil {
		return c, nil
	}
	tc := tls.Client(c, s.tlsCli)
	if err := tc.HandshakeContext(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return tc, nil
}

// ListenAddr implements routable.
func (s *stdServer) ListenAddr() string { return s.ln.Addr().String() }

// Route implements routable.
func (s *stdServer) Route(hostport string) error {
	if hostport == "" {
		hostport = s.ln.Addr().String()
	}
	s.dialTo = hostport
	return nil
}

func (s *stdServer) Close() error { return s.shutdown(s.ln) }

type yamuxStream struct{ *yamux.Stream }

// CloseWrite: a yamux stream's Close is a half close (it sends FIN and keeps
// reading).
func (s yamuxStream) CloseWrite() error { return s.Stream.Close() }

type yamuxConn struct{ sess *yamux.Session }

func (c yamuxConn) OpenStream(ctx context.Context) (stream, error) {
	st, err := c.sess.OpenStream()
	if err != nil {
		return nil, err
	}
	return yamuxStream{st}, nil
}

func (c yamuxConn) Close() error { return c.sess.Close() }

// plainConn is a connection without a multiplexer: its first stream is the
// connection itself, every further stream is a new connection.
type plainConn struct {
	s     *stdServer
	first stream
	mu    sync.Mutex
	used  bool
	more  []stream
}

func (c *plainConn) OpenStream(ctx context.Context) (stream, error) {
	c.mu.Lock()
	if !c.used {
		c.used = true
		c.mu.Unlock()
		return c.first, nil
	}
	c.mu.Unlock()
	nc, err := c.s.dialOne(ctx)
	if err != nil {
		return nil, err
	}
	st := nc.(stream)
	c.mu.Lock()
	c.more = append(c.more, st)
	c.mu.Unlock()
	return st, nil
}

func (c *plainConn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range c.more {
		st.Close()
	}
	return c.first.Close()
}

// ---- go-libp2p: its TCP transport and upgrader (no host) ----

type libp2pServer struct {
	serverBase
	security string
	srvTpt   *tcp.TcpTransport
	cliTpt   *tcp.TcpTransport
	srvID    peer.ID
	ln       transport.Listener
	dialTo   ma.Multiaddr // where Dial connects: the listener, or a proxy in front of it
}

// libp2pTransport builds a TCP transport with one security protocol and
// yamux, exactly as go-libp2p's defaults do (windows grow to 16 MiB).
func libp2pTransport(security string) (*tcp.TcpTransport, peer.ID, error) {
	priv, _, err := lpcrypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		return nil, "", err
	}
	id, err := peer.IDFromPrivateKey(priv)
	if err != nil {
		return nil, "", err
	}
	ycfg := *lpyamux.DefaultTransport.Config()
	muxers := []upgrader.StreamMuxer{{ID: lpyamux.ID, Muxer: (*lpyamux.Transport)(&ycfg)}}
	var st sec.SecureTransport
	switch security {
	case "noise":
		st, err = noise.New(noise.ID, priv, muxers)
	case "tls":
		st, err = libp2ptls.New(libp2ptls.ID, priv, muxers)
	default:
		err = fmt.Errorf("bench: unknown libp2p security %q", security)
	}
	if err != nil {
		return nil, "", err
	}
	rcmgr := &network.NullResourceManager{}
	up, err := upgrader.New([]sec.SecureTransport{st}, muxers, nil, rcmgr, nil)
	if err != nil {
		return nil, "", err
	}
	tpt, err := tcp.NewTCPTransport(up, rcmgr, nil)
	if err != nil {
		return nil, "", err
	}
	return tpt, id, nil
}

func startLibp2p(_ context.Context, security string) (server, error) {
	srvTpt, srvID, err := libp2pTransport(security)
	if err != nil {
		return nil, err
	}
	cliTpt, _, err := libp2pTransport(security)
	if err != nil {
		return nil, err
	}
	ln, err := srvTpt.Listen(ma.StringCast("/ip4/127.0.0.1/tcp/0"))
	if err != nil {
		return nil, err
	}
	s := &libp2pServer{security: security, srvTpt: srvTpt, cliTpt: cliTpt, srvID: srvID, ln: ln, dialTo: ln.Multiaddr()}
	s.wg.Go(s.accept)
	return s, nil
}

func (s *libp2pServer) accept() {
	acceptLoop(s.ln.Accept, func(c transport.CapableConn) {
		if !s.admit(c) {
			return
		}
		s.wg.Go(func() {
			defer s.release(c)
			serveMuxed(c, &s.wg)
		})
	})
}

// serveMuxed accepts streams of a go-libp2p connection until it ends.
func serveMuxed(c network.MuxedConn, wg *sync.WaitGroup) {
	defer c.Close()
	acceptLoop(c.AcceptStream, func(st network.MuxedStream) {
		wg.Go(func() {
			serveStream(st)
			st.Close()
		})
	})
}

func (s *libp2pServer) Dial(ctx context.Context) (conn, error) {
	c, err := s.cliTpt.Dial(ctx, s.dialTo, s.srvID)
	if err != nil {
		return nil, err
	}
	// Both ends of a peer-to-peer connection accept streams.
	s.wg.Go(func() { serveMuxed(c, &s.wg) })
	return libp2pConn{c}, nil
}

// ListenAddr implements routable.
func (s *libp2pServer) ListenAddr() string { return s.ln.Addr().String() }

// Route implements routable.
func (s *libp2pServer) Route(hostport string) error {
	if hostport == "" {
		s.dialTo = s.ln.Multiaddr()
		return nil
	}
	a, err := hostPortAddr(hostport)
	if err != nil {
		return err
	}
	s.dialTo = a
	return nil
}

func (s *libp2pServer) Close() error { return s.shutdown(s.ln) }

type libp2pConn struct{ c transport.CapableConn }

func (c libp2pConn) OpenStream(ctx context.Context) (stream, error) {
	return c.c.OpenStream(ctx)
}

func (c libp2pConn) Close() error { return c.c.Close() }

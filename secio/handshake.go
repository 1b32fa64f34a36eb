package secio

import (
	"bytes"
	"context"
	"crypto/ecdh"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"time"

	"github.com/tendril-p2p/tendril/cipher/aead"
	"github.com/tendril-p2p/tendril/hash/blake3"
)

// Context strings for BLAKE3 in derive-key mode, and the signature prefix.
const (
	contextTranscript = "tendril 2026-11-30 secio v1 transcript"
	contextKeyFirst   = "tendril 2026-11-30 secio v1 key first-to-second"
	contextKeySecond  = "tendril 2026-11-30 secio v1 key second-to-first"
	signaturePrefix   = "tendril 2026-11-30 secio v1 signature\x00"
)

// Signer roles in the signed message.
const (
	roleFirst  = 0x01
	roleSecond = 0x02
)

// Client runs the handshake on conn as the side that dialled it and returns
// the secure connection. The messages are the same for both roles: Client
// and Server differ only in how they are logged.
//
// The handshake takes two flights (each side's Propose, with a key share,
// then each side's Confirm) when both sides share a key for the negotiated
// key exchange, and three otherwise (an Exchange flight in between).
//
// The handshake is bounded by cfg.HandshakeTimeout and by ctx; it uses the
// deadlines of conn and clears them when it succeeds. On any error conn is
// closed and the error is a *HandshakeError naming the failed step, wrapping
// one of this package's sentinels, an I/O error, or ctx's error.
func Client(ctx context.Context, conn net.Conn, cfg *Config) (*Conn, error) {
	return handshake(ctx, conn, cfg, "client")
}

// Server runs the handshake on conn as the side that accepted it. See
// Client.
func Server(ctx context.Context, conn net.Conn, cfg *Config) (*Conn, error) {
	return handshake(ctx, conn, cfg, "server")
}

// handshakeArena is the room for the handshake messages and the
// transcript input in a handshake's own state: enough for two Proposes with
// X25519 or P-256 shares (452 or 580 bytes with the default ciphers), and for
// the Exchange flight with X25519 keys or without shares (up to 576).
// Longer messages (a peer sending large extensions, a fallback to the
// Exchange flight after P-256 shares) spill to the heap.
const handshakeArena = 640

// handshakeState carries one handshake from Propose to key confirmation.
type handshakeState struct {
	c    *Conn
	cfg  resolved
	step string
	// direct: writes go straight to the socket. A kernel socket buffer
	// takes each small handshake message without waiting for the peer to
	// read, so no writer goroutine is needed; other transports (net.Pipe)
	// get one writer goroutine for the handshake, fed by wmsg.
	direct bool
	wmsg   chan []byte
	werr   chan error

	localNonce [NonceSize]byte
	// The messages as sent, length prefix included, in arena. The
	// Exchanges are nil when the key shares are used.
	localPropose, remotePropose   []byte
	localExchange, remoteExchange []byte
	remote                        propose // parsed remotePropose (aliases it)
	remotePub                     *PublicKey
	first                         bool // the local preference order won
	kex                           KeyExchange
	suite                         aead.Suite
	// shareKex is the key exchange of the local Propose's key share (0
	// without one); useShares is set when both Proposes carry a share for
	// kex, so that no Exchange is sent.
	shareKex  KeyExchange
	useShares bool
	sendMax   int

	eph        *ecdh.PrivateKey // local ephemeral key, from the share or the Exchange
	scalar     [32]byte         // ephemeral scalar as drawn, cleared after use
	transcript [32]byte
	confirm    [confirmSize]byte // the peer's Confirm plaintext
	ownConfirm [confirmSize]byte // the local Confirm plaintext

	arena []byte // append-only; starts as space[:0]
	space [handshakeArena]byte
}

// newHandshakeState prepares a handshake on conn; cfg must be valid.
func newHandshakeState(conn net.Conn, cfg *Config) (*handshakeState, error) {
	hs := &handshakeState{}
	if err := cfg.resolve(&hs.cfg); err != nil {
		return nil, err
	}
	hs.c = newConn(conn)
	hs.c.in.maxLen = hs.cfg.maxFrame + maxOverhead
	hs.arena = hs.space[:0]
	switch conn.(type) {
	case *net.TCPConn, *net.UnixConn:
		hs.direct = true
	}
	return hs, nil
}

func handshake(ctx context.Context, conn net.Conn, cfg *Config, role string) (*Conn, error) {
	hs, err := newHandshakeState(conn, cfg)
	if err != nil {
		conn.Close()
		return nil, err
	}
	rc := &hs.cfg
	if err := ctx.Err(); err != nil {
		conn.Close()
		err = &HandshakeError{Step: "propose", Err: context.Cause(ctx)}
		rc.debugFailed(role, conn, err)
		return nil, err
	}
	// The timeout is a deadline on conn; ctx sets a deadline in the past
	// when it is done. A conn without deadlines is closed instead.
	deadline := time.Now().Add(rc.timeout)
	var timer *time.Timer
	if conn.SetDeadline(deadline) != nil {
		timer = time.AfterFunc(rc.timeout, func() { conn.Close() })
	}
	var stop func() bool
	if ctx.Done() != nil {
		stop = context.AfterFunc(ctx, func() {
			if conn.SetDeadline(time.Unix(1, 0)) != nil {
				conn.Close()
			}
		})
	}

	err = hs.run()
	if stop != nil && !stop() && err == nil {
		err = &HandshakeError{Step: "finish", Err: context.Cause(ctx)}
	}
	if timer != nil && !timer.Stop() && err == nil {
		err = &HandshakeError{Step: "finish", Err: &timeoutError{cause: context.DeadlineExceeded}}
	}
	if err != nil {
		conn.Close()
		if ctx.Err() != nil {
			err = &HandshakeError{Step: hs.step, Err: context.Cause(ctx)}
		} else if !time.Now().Before(deadline) {
			err = &HandshakeError{Step: hs.step, Err: &timeoutError{cause: context.DeadlineExceeded}}
		}
		rc.debugFailed(role, conn, err)
		return nil, err
	}
	if timer == nil {
		if err := conn.SetDeadline(time.Time{}); err != nil {
			conn.Close()
			return nil, &HandshakeError{Step: "finish", Err: err}
		}
	}
	c := hs.c
	if rc.debugEnabled() {
		rc.logger.Debug("secio handshake complete", "role", role, "remote", conn.RemoteAddr(),
			"peer", c.remote.String(), "kex", c.kex.String(), "suite", c.suite.String(),
			"key_shares_used", hs.useShares)
	}
	return c, nil
}

// debugEnabled reports whether debug records are wanted, so that their
// arguments (a peer ID's base58 form) are built only then.
func (rc *resolved) debugEnabled() bool {
	return rc.logger != nil && rc.logger.Enabled(context.Background(), slog.LevelDebug)
}

func (rc *resolved) debugFailed(role string, conn net.Conn, err error) {
	if rc.debugEnabled() {
		rc.logger.Debug("secio handshake failed", "role", role, "remote", conn.RemoteAddr(), "err", err)
	}
}

// run performs the handshake: the flights that establish the keys, then
// the Confirm flight. In each flight both sides send at once.
func (hs *handshakeState) run() error {
	defer hs.stopWriter()
	if err := hs.establishKeys(); err != nil {
		return err
	}
	frame, err := hs.sealConfirm()
	if err != nil {
		return hs.fail("write confirm", err)
	}
	err = hs.flight("confirm", *frame, hs.readConfirm)
	putBuffer(frame)
	return err
}

// establishKeys runs the Propose flight and, unless both Proposes carry a
// key share for the negotiated key exchange, the Exchange flight; then it
// computes the transcript hash and installs the traffic keys.
func (hs *handshakeState) establishKeys() error {
	if err := hs.makePropose(); err != nil {
		return err
	}
	return hs.agreeKeys()
}

// agreeKeys is establishKeys after the local Propose has been made.
func (hs *handshakeState) agreeKeys() error {
	if err := hs.flight("propose", hs.localPropose, hs.readProposeMsg); err != nil {
		return err
	}
	if err := hs.processPropose(); err != nil {
		return err
	}
	if !hs.useShares {
		if err := hs.makeExchange(); err != nil {
			return err
		}
		if err := hs.flight("exchange", hs.localExchange, hs.readExchangeMsg); err != nil {
			return err
		}
		if err := hs.processExchange(); err != nil {
			return err
		}
	}
	return hs.deriveKeys()
}

// maxOverhead is the largest AEAD tag of any suite.
const maxOverhead = 16

// fail records the step and wraps err.
func (hs *handshakeState) fail(step string, err error) error {
	hs.step = step
	return &HandshakeError{Step: step, Err: err}
}

// flight sends msg while receiving the peer's message. Both sides send at
// once, so over an unbuffered transport such as net.Pipe the write and the
// read must overlap: the writer goroutine writes, and flight waits for the
// write to end before it returns. A socket (direct) takes the write at
// once.
func (hs *handshakeState) flight(step string, msg []byte, read func() error) error {
	hs.step = step
	conn := hs.c.conn
	if hs.direct {
		if _, err := conn.Write(msg); err != nil {
			return hs.fail("write "+step, err)
		}
		if err := read(); err != nil {
			return hs.fail("read "+step, err)
		}
		return nil
	}
	if hs.wmsg == nil {
		hs.wmsg = make(chan []byte)
		hs.werr = make(chan error, 1)
		go handshakeWriter(conn, hs.wmsg, hs.werr)
	}
	hs.wmsg <- msg
	if err := read(); err != nil {
		conn.Close() // unblocks the writer
		<-hs.werr
		return hs.fail("read "+step, err)
	}
	if err := <-hs.werr; err != nil {
		return hs.fail("write "+step, err)
	}
	return nil
}

// handshakeWriter writes each message it receives and reports the result;
// it closes errs when msgs is closed.
func handshakeWriter(conn net.Conn, msgs <-chan []byte, errs chan<- error) {
	for m := range msgs {
		_, err := conn.Write(m)
		errs <- err
	}
	close(errs)
}

// stopWriter ends the writer goroutine, if one was started, and waits for
// it to return.
func (hs *handshakeState) stopWriter() {
	if hs.wmsg != nil {
		close(hs.wmsg)
		for range hs.werr {
		}
	}
}

// readMessage reads one length-prefixed handshake message and returns a
// copy of it in the arena, length prefix included. The length is checked
// against MaxHandshakeMessage before anything is allocated.
func (hs *handshakeState) readMessage() ([]byte, error) {
	in := &hs.c.in
	if err := in.fill(hs.c.conn, frameHeaderSize, false); err != nil {
		return nil, eofUnexpected(err)
	}
	n := binary.BigEndian.Uint32(in.buf[in.r:])
	if n == 0 || n > MaxHandshakeMessage {
		return nil, fmt.Errorf("%w: length prefix %d, want 1 to %d", ErrInvalidMessage, n, MaxHandshakeMessage)
	}
	total := frameHeaderSize + int(n)
	if err := in.fill(hs.c.conn, total, false); err != nil {
		return nil, eofUnexpected(err)
	}
	start := len(hs.arena)
	hs.arena = append(hs.arena, in.buf[in.r:in.r+total]...)
	in.consume(total)
	in.settle()
	return hs.arena[start:], nil
}

// eofUnexpected maps io.EOF to io.ErrUnexpectedEOF: a handshake cut at any
// point is unexpected.
func eofUnexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// makePropose draws the nonce and, unless disabled, an ephemeral key for
// the most preferred key exchange, in that order (so that a fixed Rand
// gives fixed bytes), and encodes the local Propose with its key share.
func (hs *handshakeState) makePropose() error {
	if _, err := io.ReadFull(hs.cfg.rand, hs.localNonce[:]); err != nil {
		return hs.fail("propose", fmt.Errorf("secio: nonce: %w", err))
	}
	var extBuf [maxKeyShareExt + 5]byte // a share and the padding
	p := propose{
		version:  ProtocolVersion,
		nonce:    hs.localNonce,
		pubKey:   hs.cfg.key.pub.key,
		maxFrame: uint32(hs.cfg.maxFrame),
		kexes:    hs.cfg.kexes,
		ciphers:  hs.cfg.ciphers,
		ext:      extBuf[:0],
	}
	if !hs.cfg.noKeyShare {
		k := hs.cfg.kexes[0]
		eph, err := generateEphemeral(k, hs.cfg.rand, &hs.scalar)
		if err != nil {
			return hs.fail("propose", err)
		}
		hs.eph, hs.shareKex = eph, k
		p.ext = appendKeyShare(p.ext, k, eph.PublicKey().Bytes())
	}
	if (proposeFixedLen+len(p.kexes)+len(p.ciphers)+len(p.ext))%2 == 0 {
		// Keep the body length odd, so that a legacy TEA peer (whose
		// frames are multiples of 8 bytes) always rejects it as malformed
		// instead of decrypting it to garbage. Padding is the last
		// extension (the highest type).
		p.ext = append(p.ext, extPadding...)
	}
	start := len(hs.arena)
	hs.arena = p.appendTo(hs.arena)
	hs.localPropose = hs.arena[start:]
	return nil
}

func (hs *handshakeState) readProposeMsg() error {
	msg, err := hs.readMessage()
	if err != nil {
		return err
	}
	if err := parsePropose(&hs.remote, msg[frameHeaderSize:]); err != nil {
		return err
	}
	hs.remotePropose = msg
	return nil
}

// processPropose checks the remote identity and negotiates the order, the
// key exchange, the cipher and the frame size, and decides whether the key
// shares are used. No ECDH runs before the expected peer ID has been
// checked (the local share's key was generated before sending).
func (hs *handshakeState) processPropose() error {
	const step = "propose"
	p := &hs.remote
	if p.version < 1 {
		return hs.fail(step, fmt.Errorf("%w: peer speaks version %d", ErrUnsupportedVersion, p.version))
	}
	pub, err := UnmarshalPublicKey(p.pubKey)
	if err != nil {
		return hs.fail(step, err)
	}
	local := hs.cfg.key.pub
	if pub.Equal(local) {
		return hs.fail(step, fmt.Errorf("%w: remote identity is the local one (%s)", ErrSelfDial, local.id))
	}
	if exp := hs.cfg.expected; !exp.IsZero() && !exp.Matches(pub) {
		return hs.fail(step, fmt.Errorf("%w: expected %s, got %s", ErrPeerIDMismatch, exp, pub.id))
	}
	hs.remotePub = pub

	h1 := orderHash(pub.key, hs.localNonce[:])
	h2 := orderHash(local.key, p.nonce[:])
	switch bytes.Compare(h1[:], h2[:]) {
	case 0:
		return hs.fail(step, fmt.Errorf("%w: equal order hashes", ErrSelfDial))
	case 1:
		hs.first = true
	}

	var ok bool
	if hs.first {
		hs.kex, ok = selectFirst(hs.cfg.kexes, p.kexes)
	} else {
		hs.kex, ok = selectFirst(p.kexes, hs.cfg.kexes)
	}
	if !ok || !hs.kex.Valid() {
		return hs.fail(step, &NoCommonSuiteError{What: "key exchange", Local: kexNames(hs.cfg.kexes), Remote: kexNames(p.kexes)})
	}
	if hs.first {
		hs.suite, ok = selectFirst(hs.cfg.ciphers, p.ciphers)
	} else {
		hs.suite, ok = selectFirst(p.ciphers, hs.cfg.ciphers)
	}
	if !ok || !hs.suite.Valid() {
		return hs.fail(step, &NoCommonSuiteError{What: "cipher", Local: suiteNames(hs.cfg.ciphers), Remote: suiteNames(p.ciphers)})
	}
	hs.sendMax = int(min(uint32(hs.cfg.maxFrame), p.maxFrame))
	// Both sides see the same two Proposes and the same kex, so they take
	// the same decision.
	hs.useShares = hs.shareKex == hs.kex && p.shareKex == hs.kex
	return nil
}

// orderHash is BLAKE3-256(public key || nonce), the ordering hash.
func orderHash(pub, nonce []byte) [32]byte {
	var b [PublicKeySize + NonceSize]byte
	copy(b[:], pub)
	copy(b[PublicKeySize:], nonce)
	return blake3.Sum256(b[:])
}

// selectFirst returns the first entry of pref that also appears in other.
func selectFirst[T comparable](pref, other []T) (T, bool) {
	for _, a := range pref {
		for _, b := range other {
			if a == b {
				return a, true
			}
		}
	}
	var zero T
	return zero, false
}

// makeExchange encodes the local Exchange. A side whose key share was for
// the negotiated key exchange sends the same key again; otherwise it draws
// a new one.
func (hs *handshakeState) makeExchange() error {
	if hs.eph == nil || hs.shareKex != hs.kex {
		eph, err := generateEphemeral(hs.kex, hs.cfg.rand, &hs.scalar)
		if err != nil {
			return hs.fail("exchange", err)
		}
		hs.eph = eph
	}
	e := exchange{kex: hs.kex, key: hs.eph.PublicKey().Bytes()}
	start := len(hs.arena)
	hs.arena = e.appendTo(hs.arena)
	hs.localExchange = hs.arena[start:]
	return nil
}

func (hs *handshakeState) readExchangeMsg() error {
	msg, err := hs.readMessage()
	if err != nil {
		return err
	}
	if _, err := parseExchange(msg[frameHeaderSize:]); err != nil {
		return err
	}
	hs.remoteExchange = msg
	return nil
}

// processExchange checks the peer's Exchange.
func (hs *handshakeState) processExchange() error {
	e, err := parseExchange(hs.remoteExchange[frameHeaderSize:])
	if err != nil {
		return hs.fail("exchange", err)
	}
	if e.kex != hs.kex {
		return hs.fail("exchange", fmt.Errorf("%w: peer used %s, negotiated %s", ErrInvalidKeyExchange, e.kex, hs.kex))
	}
	return nil
}

// deriveKeys runs ECDH with the peer's ephemeral key (from its key share or
// its Exchange), computes the transcript hash and installs one AEAD per
// direction.
func (hs *handshakeState) deriveKeys() error {
	step, peerKey := "key share", hs.remote.shareKey()
	if !hs.useShares {
		// The key ends the Exchange checked by processExchange (type,
		// code and u16 length before it).
		step, peerKey = "exchange", hs.remoteExchange[frameHeaderSize+4:]
	}
	secret, err := sharedSecret(hs.kex, hs.eph, peerKey)
	hs.eph = nil
	if err != nil {
		return hs.fail(step, err)
	}
	defer clear(secret)

	// T = BLAKE3-derive-key(P1 || P2), or (P1 || P2 || E1 || E2) after an
	// Exchange flight, assembled in the arena.
	start := len(hs.arena)
	pF, pS, eF, eS := hs.localPropose, hs.remotePropose, hs.localExchange, hs.remoteExchange
	if !hs.first {
		pF, pS, eF, eS = pS, pF, eS, eF
	}
	hs.arena = append(hs.arena, pF...)
	hs.arena = append(hs.arena, pS...)
	if !hs.useShares {
		hs.arena = append(hs.arena, eF...)
		hs.arena = append(hs.arena, eS...)
	}
	blake3.DeriveKey(hs.transcript[:], contextTranscript, hs.arena[start:])
	hs.arena = hs.arena[:start]

	var matBuf [32 + 66]byte // T || secret (32 bytes for both groups)
	material := append(append(matBuf[:0], hs.transcript[:]...), secret...)
	var kFirst, kSecond [32]byte
	defer clear(matBuf[:])
	defer clear(kFirst[:])
	defer clear(kSecond[:])
	ks := hs.suite.KeySize()
	blake3.DeriveKey(kFirst[:ks], contextKeyFirst, material)
	blake3.DeriveKey(kSecond[:ks], contextKeySecond, material)
	outKey, inKey := kFirst[:ks], kSecond[:ks]
	if !hs.first {
		outKey, inKey = inKey, outKey
	}
	outAEAD, err := aead.New(hs.suite, outKey)
	if err != nil {
		return hs.fail(step, err)
	}
	inAEAD, err := aead.New(hs.suite, inKey)
	if err != nil {
		return hs.fail(step, err)
	}
	c := hs.c
	c.out.aead, c.in.aead = outAEAD, inAEAD
	c.out.maxLen = hs.sendMax
	c.in.maxLen = hs.cfg.maxFrame + outAEAD.Overhead()
	return nil
}

// signedLen is the length of a signed message.
const signedLen = len(signaturePrefix) + 1 + 32

// signedMessage is what a side with the given role signs: a prefix, the
// role byte and the transcript hash.
func signedMessage(role byte, transcript [32]byte) [signedLen]byte {
	var m [signedLen]byte
	n := copy(m[:], signaturePrefix)
	m[n] = role
	copy(m[n+1:], transcript[:])
	return m
}

func (hs *handshakeState) roles() (local, remote byte) {
	if hs.first {
		return roleFirst, roleSecond
	}
	return roleSecond, roleFirst
}

// sealConfirm builds the first encrypted frame, the peer's nonce and the
// local signature over the transcript, in a pooled buffer.
func (hs *handshakeState) sealConfirm() (*[]byte, error) {
	local, _ := hs.roles()
	m := signedMessage(local, hs.transcript)
	sig := hs.cfg.key.Sign(m[:])
	pt := appendConfirm(hs.ownConfirm[:0], hs.remote.nonce, sig)
	return hs.c.out.sealFrame(pt)
}

// readConfirm reads the peer's first frame and checks the echoed nonce, then
// the peer's signature.
func (hs *handshakeState) readConfirm() error {
	in := &hs.c.in
	n, err := in.readFrame(hs.c.conn, hs.confirm[:])
	if err != nil {
		return eofUnexpected(err)
	}
	pt := hs.confirm[:n]
	if n == 0 {
		// Longer than a Confirm (or empty): left in the buffer.
		pt = in.plain
		in.plain = nil
		defer in.settle()
	}
	cf, err := parseConfirm(pt)
	if err != nil {
		return err
	}
	if cf.nonce != hs.localNonce {
		return ErrNonceMismatch
	}
	_, remote := hs.roles()
	m := signedMessage(remote, hs.transcript)
	if !hs.remotePub.Verify(m[:], cf.sig) {
		return ErrInvalidSignature
	}
	c := hs.c
	c.local = hs.cfg.key.pub.id
	c.remote = hs.remotePub.id
	c.remotePub = hs.remotePub
	c.suite = hs.suite
	c.kex = hs.kex
	c.secure = true
	return nil
}

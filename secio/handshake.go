package secio

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"time"

	"github.com/tendril-p2p/tendril/cipher/aead"
	"github.com/tendril-p2p/tendril/hash/blake3"
)

// Context strings for BLAKE3 in derive-key mode, and the signature prefix.
// Each use of a secret has its own context, and each direction its own
// secret (docs/secio.md section 4).
const (
	contextTranscript   = "tendril 2026-12-01 secio v3 transcript"
	contextHandshakeD2L = "tendril 2026-12-01 secio v3 handshake secret dialer-to-listener"
	contextHandshakeL2D = "tendril 2026-12-01 secio v3 handshake secret listener-to-dialer"
	contextTrafficD2L   = "tendril 2026-12-01 secio v3 traffic secret dialer-to-listener"
	contextTrafficL2D   = "tendril 2026-12-01 secio v3 traffic secret listener-to-dialer"
	contextRecordKey    = "tendril 2026-12-01 secio v3 record key"
	contextRecordIV     = "tendril 2026-12-01 secio v3 record iv"
	contextSecretUpdate = "tendril 2026-12-01 secio v3 traffic secret update"
	signaturePrefix     = "tendril 2026-12-01 secio v3 signature\x00"
)

// Roles in the signed messages.
const (
	roleDialer   = 0x01
	roleListener = 0x02
)

// transcriptStart is the transcript hash state before any message: BLAKE3
// in derive-key mode with contextTranscript (copied, never modified).
var transcriptStart = *blake3.NewDeriveKey(contextTranscript)

// Client runs the handshake on conn as the side that dialled it and returns
// the secure connection.
//
// The dialer speaks first: a ClientHello with its key share; the listener
// answers with a ServerHello with its share and, encrypted, its identity
// and signature; the dialer checks them (and Config.ExpectedPeer) before it
// sends, encrypted, its own identity and signature. Client returns as soon
// as that last flight is written, so that the application's first frames
// follow it at once: data then reaches the listener one round trip after
// the connection, as with TLS 1.3. If the listener refuses the dialer's
// identity, the Conn's first Read fails. A listener that wants another key
// exchange than the dialer's first choice costs one more round trip (a
// HelloRetryRequest).
//
// The handshake is bounded by cfg.HandshakeTimeout and by ctx; it uses the
// deadlines of conn and clears them when it succeeds. On any error conn is
// closed and the error is a *HandshakeError naming the failed step, wrapping
// one of this package's sentinels, an I/O error, or ctx's error.
func Client(ctx context.Context, conn net.Conn, cfg *Config) (*Conn, error) {
	return handshake(ctx, conn, cfg, true)
}

// Server runs the handshake on conn as the side that accepted it and
// returns once the dialer's identity and signature have been verified. The
// dialer's first message must arrive within cfg.HelloTimeout. See Client.
func Server(ctx context.Context, conn net.Conn, cfg *Config) (*Conn, error) {
	return handshake(ctx, conn, cfg, false)
}

// Probe runs the dialer's side of the handshake on conn until the listener has proven
// its identity (its signature over the transcript, and cfg.ExpectedPeer if set, checked
// as Client checks them), then closes conn without sending the dialer's own identity, and
// returns the listener's key. It tells whether the peer expected is really there (a
// reachability check, say) without revealing who asks and without leaving a session
// behind: the listener's handshake fails (it reads the end of the connection where the
// dialer's identity was due). Errors are those of Client.
func Probe(ctx context.Context, conn net.Conn, cfg *Config) (*PublicKey, error) {
	c, err := handshakeMode(ctx, conn, cfg, true, true)
	if err != nil {
		return nil, err
	}
	pub := c.remotePub
	c.conn.Close()
	c.in.drop()
	c.in.wipe()
	c.out.wipe()
	return pub, nil
}

// handshakeState carries one handshake from the first hello to the
// traffic keys.
type handshakeState struct {
	c        *Conn
	cfg      resolved
	ctx      context.Context
	dialer   bool
	step     string
	deadline time.Time // conn's current deadline (zero with a timer)

	th        blake3.Hasher // transcript: every handshake byte as sent
	nonce     [NonceSize]byte
	eph       ephemeral
	kex       KeyExchange
	suite     aead.Suite
	sendMax   int
	secret    [maxSecretSize]byte
	secretLen int
	remotePub *PublicKey
	// pending is the length of the hello still buffered while hs.ch or
	// hs.sh aliases it.
	pending int

	ch clientHello // the listener's parsed ClientHello (aliases the read buffer)
	sh serverHello // the dialer's parsed ServerHello (same)

	probe bool // a dialer that stops once the listener is verified (Probe)
}

func (hs *handshakeState) role() string {
	if hs.dialer {
		return "client"
	}
	return "server"
}

func handshake(ctx context.Context, conn net.Conn, cfg *Config, dialer bool) (*Conn, error) {
	return handshakeMode(ctx, conn, cfg, dialer, false)
}

func handshakeMode(ctx context.Context, conn net.Conn, cfg *Config, dialer, probe bool) (*Conn, error) {
	hs := &handshakeState{ctx: ctx, dialer: dialer, probe: probe}
	if err := cfg.withDefaults(&hs.cfg); err != nil {
		conn.Close()
		return nil, err
	}
	rc := &hs.cfg
	hs.c = newConn(conn)
	hs.c.in.mem = rc.memory
	hs.th = transcriptStart
	defer clear(hs.secret[:])
	first := "write client hello"
	if !dialer {
		first = "read client hello"
	}
	if err := ctx.Err(); err != nil {
		conn.Close()
		err = &HandshakeError{Step: first, Err: context.Cause(ctx)}
		rc.debugFailed(hs.role(), conn, err)
		return nil, err
	}
	// The timeout is a deadline on conn; ctx sets a deadline in the past
	// when it is done. A conn without deadlines is closed instead.
	end := time.Now().Add(rc.timeout)
	var timer *time.Timer
	if conn.SetDeadline(end) != nil {
		timer = time.AfterFunc(rc.timeout, func() { conn.Close() })
	} else {
		hs.deadline = end
	}
	var stop func() bool
	if ctx.Done() != nil {
		stop = context.AfterFunc(ctx, func() {
			if conn.SetDeadline(time.Unix(1, 0)) != nil {
				conn.Close()
			}
		})
	}

	var err error
	if dialer {
		err = hs.runDialer()
	} else {
		err = hs.runListener(end)
	}
	if stop != nil && !stop() && err == nil {
		err = &HandshakeError{Step: "finish", Err: context.Cause(ctx)}
	}
	if timer != nil && !timer.Stop() && err == nil {
		err = &HandshakeError{Step: "finish", Err: &timeoutError{cause: context.DeadlineExceeded}}
	}
	if err != nil {
		conn.Close()
		hs.c.in.drop()
		hs.c.in.wipe()
		hs.c.out.wipe()
		if ctx.Err() != nil {
			err = &HandshakeError{Step: hs.step, Err: context.Cause(ctx)}
		} else if !time.Now().Before(end) || (!hs.deadline.IsZero() && !time.Now().Before(hs.deadline)) {
			err = &HandshakeError{Step: hs.step, Err: &timeoutError{cause: context.DeadlineExceeded}}
		}
		rc.debugFailed(hs.role(), conn, err)
		return nil, err
	}
	if timer == nil {
		if err := conn.SetDeadline(time.Time{}); err != nil {
			conn.Close()
			return nil, &HandshakeError{Step: "finish", Err: err}
		}
	}
	c := hs.c
	if rc.debugEnabled() && !probe {
		rc.logger.Debug("secio handshake complete", "role", hs.role(), "remote", conn.RemoteAddr(),
			"peer", c.remote.String(), "kex", c.kex.String(), "suite", c.suite.String())
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

// fail records the step and wraps err.
func (hs *handshakeState) fail(step string, err error) error {
	hs.step = step
	return &HandshakeError{Step: step, Err: err}
}

// microseconds returns d in whole microseconds, at least 1 and at most about 71 minutes.
func microseconds(d time.Duration) uint32 {
	return uint32(min(max(d.Microseconds(), 1), 1<<32-1))
}

// runDialer is the dialer's handshake: ClientHello, at most one retry,
// ServerHello and ListenerAuth, then DialerAuth and the traffic keys.
func (hs *handshakeState) runDialer() error {
	if _, err := io.ReadFull(hs.cfg.rand, hs.nonce[:]); err != nil {
		return hs.fail("write client hello", fmt.Errorf("secio: nonce: %w", err))
	}
	kex := hs.cfg.kexes[0]
	for retried := false; ; retried = true {
		sent := time.Now()
		if err := hs.sendClientHello(kex); err != nil {
			return err
		}
		retry, err := hs.readServerHello(!retried)
		if err != nil {
			return err
		}
		hs.c.handshakeRTT = microseconds(time.Since(sent))
		if retry == 0 {
			break
		}
		if retried || !contains(hs.cfg.kexes, retry) || retry == kex {
			return hs.fail("read server hello", fmt.Errorf("%w: HelloRetryRequest for %s after offering %s", ErrInvalidMessage, retry, kexNames(hs.cfg.kexes)))
		}
		kex = retry
	}
	if err := hs.processServerHello(kex); err != nil {
		return err
	}
	if err := hs.readListenerAuth(); err != nil {
		return err
	}
	if hs.probe {
		hs.c.remotePub = hs.remotePub
		return nil
	}
	if err := hs.sendDialerAuth(nil); err != nil {
		return err
	}
	return hs.finish()
}

// sendClientHello draws an ephemeral key for kex and writes a ClientHello
// with its share.
func (hs *handshakeState) sendClientHello(kex KeyExchange) error {
	const step = "write client hello"
	eph, err := generateEphemeral(kex, hs.cfg.rand, true)
	if err != nil {
		return hs.fail(step, err)
	}
	hs.eph = eph
	var shareBuf [maxShareSize]byte
	share := eph.appendDialerShare(shareBuf[:0])
	buf := getBuffer(frameHeaderSize + maxClientHello)
	msg := appendClientHello((*buf)[:0], &hs.nonce, hs.cfg.maxFrame, hs.cfg.kexes, hs.cfg.ciphers, kex, share)
	hs.th.Write(msg)
	_, err = hs.c.conn.Write(msg)
	putBuffer(buf)
	if err != nil {
		return hs.fail(step, err)
	}
	return nil
}

// readMessage reads one clear handshake message of at most limit body
// bytes, adds it to the transcript and returns its body, which aliases the
// read buffer until done is called with total. The length is checked
// before anything is allocated, and the body is read no further than its
// end, so that a message costs at most a buffer of its own size. first says
// that these are the first bytes from the peer: a length out of range there
// means the peer does not speak tendril at all (*NotTendrilError).
func (hs *handshakeState) readMessage(limit int, first bool) (body []byte, total int, err error) {
	in := &hs.c.in
	if hs.dialer && in.pooled == nil {
		// The dialer reads the listener's whole flight (ServerHello and
		// ListenerAuth, 1,288 bytes with the hybrid) with one read, not
		// three. The listener does not: a stranger's first read goes into
		// the Conn's own small array, so that a silent connection holds no
		// pooled buffer.
		if err := in.borrow(dialerFlightBuffer); err != nil {
			return nil, 0, err
		}
	}
	if err := in.fill(hs.c.conn, frameHeaderSize, false); err != nil {
		return nil, 0, eofUnexpected(err)
	}
	n := binary.BigEndian.Uint32(in.buf[in.r:])
	if n == 0 || n > uint32(limit) {
		if first {
			e := &NotTendrilError{Limit: limit}
			copy(e.Prefix[:], in.buf[in.r:])
			return nil, 0, e
		}
		return nil, 0, fmt.Errorf("%w: length prefix %d, want 1 to %d", ErrInvalidMessage, n, limit)
	}
	total = frameHeaderSize + int(n)
	if err := in.fill(hs.c.conn, total, true); err != nil {
		return nil, 0, eofUnexpected(err)
	}
	msg := in.buf[in.r : in.r+total]
	hs.th.Write(msg)
	return msg[frameHeaderSize:], total, nil
}

// dialerFlightBuffer is the read buffer the dialer borrows for the
// listener's first flight: a hybrid ServerHello and the ListenerAuth record
// (docs/secio.md), with room to spare.
const dialerFlightBuffer = 2 << 10

// done discards a message read by readMessage.
func (hs *handshakeState) done(total int) {
	hs.c.in.consume(total)
	hs.c.in.settle()
}

// eofUnexpected maps io.EOF to io.ErrUnexpectedEOF: a handshake cut at any
// point is unexpected.
func eofUnexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// readServerHello reads the listener's answer: a ServerHello (left parsed
// in hs.sh with its message still buffered) or a HelloRetryRequest, whose
// key exchange it returns. first: no answer came before (no retry).
func (hs *handshakeState) readServerHello(first bool) (KeyExchange, error) {
	const step = "read server hello"
	hs.step = step
	body, total, err := hs.readMessage(maxServerHello, first)
	if err != nil {
		return 0, hs.fail(step, err)
	}
	retry, err := parseListenerReply(&hs.sh, body)
	if err != nil {
		return 0, hs.fail(step, err)
	}
	if retry != 0 {
		hs.done(total)
		return retry, nil
	}
	hs.pending = total
	return 0, nil
}

// processServerHello checks the ServerHello against what the dialer
// offered, finishes the key exchange and installs the handshake keys.
func (hs *handshakeState) processServerHello(kex KeyExchange) error {
	const step = "read server hello"
	sh := &hs.sh
	defer hs.done(hs.pending)
	switch {
	case sh.version != ProtocolVersion:
		return hs.fail(step, fmt.Errorf("%w: listener answered with version %d", ErrUnsupportedVersion, sh.version))
	case sh.kex != kex:
		return hs.fail(step, fmt.Errorf("%w: listener chose %s, the dialer's share was %s", ErrInvalidMessage, sh.kex, kex))
	case !contains(hs.cfg.ciphers, sh.suite):
		return hs.fail(step, &NoCommonSuiteError{What: "cipher", Local: suiteNames(hs.cfg.ciphers), Remote: suiteNames([]aead.Suite{sh.suite})})
	case len(sh.share) != kex.listenerShareSize():
		return hs.fail(step, fmt.Errorf("%w: %s key share of %d bytes, want %d", ErrInvalidMessage, kex, len(sh.share), kex.listenerShareSize()))
	}
	secret, err := hs.eph.dialerSecret(hs.secret[:0], sh.share)
	hs.eph = ephemeral{}
	if err != nil {
		return hs.fail(step, err)
	}
	hs.secretLen = len(secret)
	hs.kex, hs.suite = kex, sh.suite
	hs.sendMax = int(min(uint32(hs.cfg.maxFrame), sh.maxFrame))
	return hs.installKeys(contextHandshakeD2L, contextHandshakeL2D)
}

// installKeys derives one secret per direction from the transcript so far
// and the shared secret, with the given contexts, and installs them: each
// direction's record key and IV come from its secret, with a fresh sequence
// number. Installing the traffic secrets overwrites the handshake ones, and
// rekeys the handshake AEADs in place where they can be (section 4).
func (hs *handshakeState) installKeys(d2l, l2d string) error {
	var material [32 + maxSecretSize]byte
	var sD2L, sL2D [secretSize]byte
	defer clear(material[:])
	defer clear(sD2L[:])
	defer clear(sL2D[:])
	t := hs.transcript()
	n := copy(material[:], t[:])
	n += copy(material[n:], hs.secret[:hs.secretLen])
	blake3.DeriveKey(sD2L[:], d2l, material[:n])
	blake3.DeriveKey(sL2D[:], l2d, material[:n])
	out, in := &sD2L, &sL2D
	if !hs.dialer {
		out, in = in, out
	}
	if err := hs.c.out.install(hs.suite, out); err != nil {
		return hs.fail(hs.step, err)
	}
	if err := hs.c.in.install(hs.suite, in); err != nil {
		return hs.fail(hs.step, err)
	}
	// Only the Auth record travels under a handshake key.
	hs.c.in.maxLen = authLen + recordTypeSize + hs.suite.Overhead()
	return nil
}

// transcript returns the hash of every handshake byte so far.
func (hs *handshakeState) transcript() [32]byte {
	h := hs.th
	var t [32]byte
	h.Sum(t[:0])
	return t
}

// signedLen is the length of a signed message.
const signedLen = len(signaturePrefix) + 1 + 32 + PublicKeySize

// signedMessage is what a side with the given role signs: a prefix, the
// role byte, the transcript hash up to its Auth message and its own
// identity key.
func signedMessage(role byte, transcript [32]byte, pub []byte) [signedLen]byte {
	var m [signedLen]byte
	n := copy(m[:], signaturePrefix)
	m[n] = role
	n++
	n += copy(m[n:], transcript[:])
	copy(m[n:], pub)
	return m
}

// sealAuth appends the local Auth record (identity and signature over the
// transcript so far) to b, sealed under the handshake key, and adds it to
// the transcript. A non-nil pt replaces the plaintext (record type
// included): the fuzz targets use it to reach the peer's decrypted Auth.
func (hs *handshakeState) sealAuth(b, pt []byte) ([]byte, error) {
	typ, role := byte(msgListenerAuth), byte(roleListener)
	if hs.dialer {
		typ, role = msgDialerAuth, roleDialer
	}
	var buf [authLen + recordTypeSize]byte
	if pt == nil {
		pub := hs.cfg.key.pub.key
		m := signedMessage(role, hs.transcript(), pub)
		pt = appendAuth(buf[:0], typ, pub, hs.cfg.key.Sign(m[:]))
		pt = append(pt, recordHandshake)
	}
	frame, err := hs.c.out.sealRecord(pt[:len(pt)-recordTypeSize], pt[len(pt)-recordTypeSize])
	if err != nil {
		return b, err
	}
	hs.th.Write(*frame)
	b = append(b, *frame...)
	putBuffer(frame)
	return b, nil
}

// readAuth reads the peer's Auth record, checks its identity (small-order
// keys, self-dial, Config.ExpectedPeer) and then its signature.
func (hs *handshakeState) readAuth(step string) error {
	hs.step = step
	in := &hs.c.in
	hdr, body, total, err := in.nextFrame(hs.c.conn)
	if err != nil {
		if errors.Is(err, ErrFrameTooLarge) || errors.Is(err, ErrInvalidFrame) {
			// Not an Auth record (a hello where one is due, say).
			err = fmt.Errorf("%w: %w", ErrInvalidMessage, err)
		}
		return hs.fail(step, eofUnexpected(err))
	}
	t := hs.transcript() // what the peer signed
	hs.th.Write(hdr)
	hs.th.Write(body)
	typ, role := byte(msgDialerAuth), byte(roleDialer)
	if hs.dialer {
		typ, role = msgListenerAuth, roleListener
	}
	nonce, err := in.nextNonce()
	if err != nil {
		return hs.fail(step, err)
	}
	pt, err := in.aead.Open(body[:0], nonce, body, hdr)
	if err != nil {
		return hs.fail(step, ErrAuthFailed)
	}
	in.consume(total)
	defer in.settle()
	n := len(pt) - recordTypeSize
	if pt[n] != recordHandshake {
		return hs.fail(step, fmt.Errorf("%w: record type 0x%02x, want handshake", ErrInvalidMessage, pt[n]))
	}
	rawPub, sig, err := parseAuth(pt[:n], typ)
	if err != nil {
		return hs.fail(step, err)
	}
	pub, err := hs.checkIdentity(rawPub)
	if err != nil {
		return hs.fail(step, err)
	}
	m := signedMessage(role, t, rawPub)
	if !pub.Verify(m[:], sig) {
		return hs.fail(step, ErrInvalidSignature)
	}
	hs.remotePub = pub
	return nil
}

// checkIdentity refuses small-order keys, the local key (a self-dial) and,
// if set, any key but the expected peer's.
func (hs *handshakeState) checkIdentity(raw []byte) (*PublicKey, error) {
	if smallOrder(raw) {
		return nil, fmt.Errorf("%w: small-order Ed25519 identity key", ErrInvalidKey)
	}
	pub, err := UnmarshalPublicKey(raw)
	if err != nil {
		return nil, err
	}
	local := hs.cfg.key.pub
	if pub.Equal(local) {
		return nil, fmt.Errorf("%w: remote identity is the local one (%s)", ErrSelfDial, local.id)
	}
	if exp := hs.cfg.expected; !exp.IsZero() && !exp.Matches(pub) {
		return nil, fmt.Errorf("%w: expected %s, got %s", ErrPeerIDMismatch, exp, pub.id)
	}
	return pub, nil
}

func (hs *handshakeState) readListenerAuth() error { return hs.readAuth("read listener auth") }

// sendDialerAuth writes the dialer's Auth record, the last flight (pt as
// in sealAuth).
func (hs *handshakeState) sendDialerAuth(pt []byte) error {
	const step = "write dialer auth"
	var buf [frameHeaderSize + authLen + recordTypeSize + 16]byte
	msg, err := hs.sealAuth(buf[:0], pt)
	if err != nil {
		return hs.fail(step, err)
	}
	if _, err := hs.c.conn.Write(msg); err != nil {
		return hs.fail(step, err)
	}
	return nil
}

// finish installs the traffic keys and the negotiated limits.
func (hs *handshakeState) finish() error {
	if err := hs.installKeys(contextTrafficD2L, contextTrafficL2D); err != nil {
		return err
	}
	c := hs.c
	c.out.sealed = 0
	c.out.maxLen = hs.sendMax
	c.in.maxLen = hs.cfg.maxFrame + recordTypeSize + hs.suite.Overhead()
	c.local = hs.cfg.key.pub.id
	c.remote = hs.remotePub.id
	c.remotePub = hs.remotePub
	c.suite = hs.suite
	c.kex = hs.kex
	c.secure = true
	c.dialer = hs.dialer
	return nil
}

// runListener is the listener's handshake: ClientHello (within the hello
// timeout), possibly a retry, ServerHello and ListenerAuth in one write,
// then the dialer's Auth.
func (hs *handshakeState) runListener(end time.Time) error {
	if err := hs.readClientHello(end); err != nil {
		return err
	}
	if err := hs.sendServerHello(nil); err != nil {
		return err
	}
	sent := time.Now()
	if err := hs.readAuth("read dialer auth"); err != nil {
		return err
	}
	hs.c.handshakeRTT = microseconds(time.Since(sent))
	return hs.finish()
}

// readClientHello reads the ClientHello, bounded by the hello timeout,
// chooses the key exchange and cipher, and asks once for another share if
// the dialer's does not fit. It leaves the last ClientHello parsed in hs.ch
// and its bytes buffered (hs.pending long).
func (hs *handshakeState) readClientHello(end time.Time) error {
	const step = "read client hello"
	hs.step = step
	if !hs.deadline.IsZero() && hs.cfg.helloTimeout < hs.cfg.timeout {
		// A stranger gets a short time to say anything at all.
		d := time.Now().Add(hs.cfg.helloTimeout)
		if hs.c.conn.SetDeadline(d) == nil {
			hs.deadline = d
		}
	}
	body, total, err := hs.readMessage(maxClientHello, true)
	if err != nil {
		return hs.fail(step, err)
	}
	if hs.deadline != end && !hs.deadline.IsZero() {
		if err := hs.c.conn.SetDeadline(end); err != nil {
			return hs.fail(step, err)
		}
		hs.deadline = end
		if err := hs.ctx.Err(); err != nil {
			return hs.fail(step, context.Cause(hs.ctx))
		}
	}
	ch := &hs.ch
	if err := parseClientHello(ch, body); err != nil {
		return hs.fail(step, err)
	}
	if ch.version < ProtocolVersion {
		return hs.fail(step, fmt.Errorf("%w: peer speaks version %d", ErrUnsupportedVersion, ch.version))
	}
	kex := ch.shareKex
	if !kex.Valid() || !contains(hs.cfg.kexes, kex) || !contains(ch.kexes, kex) {
		var ok bool
		if kex, ok = selectFirst(hs.cfg.kexes, ch.kexes); !ok {
			return hs.fail(step, &NoCommonSuiteError{What: "key exchange", Local: kexNames(hs.cfg.kexes), Remote: kexNames(ch.kexes)})
		}
		hs.done(total)
		if err := hs.retry(kex); err != nil {
			return err
		}
		if body, total, err = hs.readMessage(maxClientHello, false); err != nil {
			return hs.fail(step, err)
		}
		if err := parseClientHello(ch, body); err != nil {
			return hs.fail(step, err)
		}
		if ch.shareKex != kex || !contains(ch.kexes, kex) {
			return hs.fail(step, fmt.Errorf("%w: retried ClientHello has a %s share, asked for %s", ErrInvalidMessage, ch.shareKex, kex))
		}
	}
	suite, ok := selectFirst(hs.cfg.ciphers, ch.ciphers)
	if !ok {
		return hs.fail(step, &NoCommonSuiteError{What: "cipher", Local: suiteNames(hs.cfg.ciphers), Remote: suiteNames(ch.ciphers)})
	}
	hs.kex, hs.suite = kex, suite
	hs.sendMax = int(min(uint32(hs.cfg.maxFrame), ch.maxFrame))
	hs.pending = total
	return nil
}

// retry writes a HelloRetryRequest for kex.
func (hs *handshakeState) retry(kex KeyExchange) error {
	var buf [frameHeaderSize + helloRetryLen]byte
	msg := appendHelloRetry(buf[:0], kex)
	hs.th.Write(msg)
	if _, err := hs.c.conn.Write(msg); err != nil {
		return hs.fail("write hello retry", err)
	}
	return nil
}

// sendServerHello completes the key exchange with the dialer's share and
// writes the ServerHello and the ListenerAuth record together (auth as pt
// in sealAuth).
func (hs *handshakeState) sendServerHello(auth []byte) error {
	const step = "write server hello"
	hs.step = step
	total := hs.pending
	eph, err := generateEphemeral(hs.kex, hs.cfg.rand, false)
	if err != nil {
		hs.done(total)
		return hs.fail(step, err)
	}
	var shareBuf [maxListenerShare]byte
	share, secret, err := eph.listenerSecret(shareBuf[:0], hs.secret[:0], hs.ch.share, hs.cfg.rand)
	hs.done(total) // the dialer's share is used up
	hs.ch.share = nil
	if err != nil {
		return hs.fail("read client hello", err)
	}
	hs.secretLen = len(secret)
	if _, err := io.ReadFull(hs.cfg.rand, hs.nonce[:]); err != nil {
		return hs.fail(step, fmt.Errorf("secio: nonce: %w", err))
	}
	sh := serverHello{
		version:  ProtocolVersion,
		nonce:    hs.nonce,
		maxFrame: uint32(hs.cfg.maxFrame),
		kex:      hs.kex,
		suite:    hs.suite,
		share:    share,
	}
	buf := getBuffer(frameHeaderSize + maxServerHello + frameHeaderSize + authLen + recordTypeSize + 16)
	msg := appendServerHello((*buf)[:0], &sh)
	hs.th.Write(msg)
	if err := hs.installKeys(contextHandshakeD2L, contextHandshakeL2D); err != nil {
		putBuffer(buf)
		return err
	}
	if msg, err = hs.sealAuth(msg, auth); err != nil {
		putBuffer(buf)
		return hs.fail(step, err)
	}
	_, err = hs.c.conn.Write(msg)
	putBuffer(buf)
	if err != nil {
		return hs.fail(step, err)
	}
	return nil
}

// contains reports whether list holds v.
func contains[T comparable](list []T, v T) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// selectFirst returns the first entry of pref that also appears in other.
func selectFirst[T comparable](pref, other []T) (T, bool) {
	for _, a := range pref {
		if contains(other, a) {
			return a, true
		}
	}
	var zero T
	return zero, false
}

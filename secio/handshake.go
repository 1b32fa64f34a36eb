package secio

import (
	"bytes"
	"context"
	"crypto/ecdh"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
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

// errTimerExpired is the context cause set by the handshake's own timer.
var errTimerExpired = errors.New("secio: handshake timer expired")

// Client runs the handshake on conn as the side that dialled it and returns
// the secure connection. The messages are the same for both roles: Client
// and Server differ only in how they are logged.
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

// handshakeState carries one handshake from Propose to key confirmation.
type handshakeState struct {
	c    *Conn
	cfg  *resolved
	step string

	localNonce    [NonceSize]byte
	localPropose  []byte // wire bytes, length prefix included
	remotePropose []byte
	remote        *propose
	remotePub     *PublicKey
	first         bool // the local preference order won
	kex           KeyExchange
	suite         aead.Suite
	sendMax       int

	eph            *ecdh.PrivateKey
	localExchange  []byte
	remoteExchange []byte
	transcript     [32]byte
}

func handshake(ctx context.Context, conn net.Conn, cfg *Config, role string) (*Conn, error) {
	rc, err := cfg.resolve()
	if err != nil {
		conn.Close()
		return nil, err
	}
	ctx, cancel := context.WithTimeoutCause(ctx, rc.timeout, errTimerExpired)
	defer cancel()
	stop := context.AfterFunc(ctx, func() {
		if conn.SetDeadline(time.Unix(1, 0)) != nil {
			conn.Close()
		}
	})

	hs := &handshakeState{c: newConn(conn), cfg: rc}
	err = hs.run()
	if !stop() && err == nil {
		err = &HandshakeError{Step: "finish", Err: context.Cause(ctx)}
	}
	if err != nil {
		conn.Close()
		if ctx.Err() != nil {
			cause := context.Cause(ctx)
			if cause == errTimerExpired {
				cause = &timeoutError{cause: context.DeadlineExceeded}
			}
			err = &HandshakeError{Step: hs.step, Err: cause}
		}
		rc.debug("secio handshake failed", "role", role, "remote", conn.RemoteAddr(), "err", err)
		return nil, err
	}
	if err := conn.SetDeadline(time.Time{}); err != nil {
		conn.Close()
		return nil, &HandshakeError{Step: "finish", Err: err}
	}
	c := hs.c
	rc.debug("secio handshake complete", "role", role, "remote", conn.RemoteAddr(),
		"peer", c.remote.String(), "kex", c.kex.String(), "suite", c.suite.String())
	return c, nil
}

func (rc *resolved) debug(msg string, args ...any) {
	if rc.logger != nil {
		rc.logger.Debug(msg, args...)
	}
}

// run performs the handshake steps in order.
func (hs *handshakeState) run() error {
	hs.c.in.maxLen = hs.cfg.maxFrame + maxOverhead
	if err := hs.makePropose(); err != nil {
		return err
	}
	if err := hs.flight("propose", hs.writeRaw(&hs.localPropose), hs.readProposeMsg); err != nil {
		return err
	}
	if err := hs.processPropose(); err != nil {
		return err
	}
	if err := hs.makeExchange(); err != nil {
		return err
	}
	if err := hs.flight("exchange", hs.writeRaw(&hs.localExchange), hs.readExchangeMsg); err != nil {
		return err
	}
	if err := hs.processExchange(); err != nil {
		return err
	}
	if err := hs.flight("confirm", hs.writeConfirm, hs.readConfirm); err != nil {
		return err
	}
	return nil
}

// maxOverhead is the largest AEAD tag of any suite.
const maxOverhead = 16

// fail records the step and wraps err.
func (hs *handshakeState) fail(step string, err error) error {
	hs.step = step
	return &HandshakeError{Step: step, Err: err}
}

// flight sends one message while receiving the peer's (both sides send at
// once, so over an unbuffered transport such as net.Pipe the write and the
// read must overlap). The writing goroutine always ends before flight
// returns.
func (hs *handshakeState) flight(step string, write, read func() error) error {
	hs.step = step
	done := make(chan error, 1)
	go func() { done <- write() }()
	if err := read(); err != nil {
		hs.c.conn.Close() // unblocks the writer
		<-done
		return hs.fail("read "+step, err)
	}
	if err := <-done; err != nil {
		return hs.fail("write "+step, err)
	}
	return nil
}

func (hs *handshakeState) writeRaw(msg *[]byte) func() error {
	return func() error {
		_, err := hs.c.conn.Write(*msg)
		return err
	}
}

// readMessage reads one length-prefixed handshake message and returns a
// copy of it, length prefix included. The length is checked against
// MaxHandshakeMessage before anything is allocated.
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
	msg := bytes.Clone(in.buf[in.r : in.r+total])
	in.consume(total)
	in.settle()
	return msg, nil
}

// eofUnexpected maps io.EOF to io.ErrUnexpectedEOF: a handshake cut at any
// point is unexpected.
func eofUnexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

func (hs *handshakeState) makePropose() error {
	if _, err := io.ReadFull(hs.cfg.rand, hs.localNonce[:]); err != nil {
		return hs.fail("propose", fmt.Errorf("secio: nonce: %w", err))
	}
	p := &propose{
		version:  ProtocolVersion,
		nonce:    hs.localNonce,
		pubKey:   hs.cfg.key.pub.key,
		maxFrame: uint32(hs.cfg.maxFrame),
		kexes:    hs.cfg.kexes,
		ciphers:  hs.cfg.ciphers,
	}
	if (proposeFixedLen+len(p.kexes)+len(p.ciphers))%2 == 0 {
		// Keep the body length odd, so that a legacy TEA peer (whose
		// frames are multiples of 8 bytes) always rejects it as malformed
		// instead of decrypting it to garbage.
		p.ext = extPadding
	}
	hs.localPropose = p.marshal()
	return nil
}

func (hs *handshakeState) readProposeMsg() error {
	msg, err := hs.readMessage()
	if err != nil {
		return err
	}
	p, err := parsePropose(msg[frameHeaderSize:])
	if err != nil {
		return err
	}
	hs.remotePropose, hs.remote = msg, p
	return nil
}

// processPropose checks the remote identity and negotiates the order, the
// key exchange, the cipher and the frame size. No key work happens before
// the expected peer ID has been checked.
func (hs *handshakeState) processPropose() error {
	const step = "propose"
	p := hs.remote
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

func (hs *handshakeState) makeExchange() error {
	eph, err := generateEphemeral(hs.kex, hs.cfg.rand)
	if err != nil {
		return hs.fail("exchange", err)
	}
	hs.eph = eph
	e := &exchange{kex: hs.kex, key: eph.PublicKey().Bytes()}
	hs.localExchange = e.marshal()
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

// processExchange runs ECDH, computes the transcript hash and installs one
// AEAD per direction.
func (hs *handshakeState) processExchange() error {
	const step = "exchange"
	e, err := parseExchange(hs.remoteExchange[frameHeaderSize:])
	if err != nil {
		return hs.fail(step, err)
	}
	if e.kex != hs.kex {
		return hs.fail(step, fmt.Errorf("%w: peer used %s, negotiated %s", ErrInvalidKeyExchange, e.kex, hs.kex))
	}
	secret, err := sharedSecret(hs.kex, hs.eph, e.key)
	hs.eph = nil
	if err != nil {
		return hs.fail(step, err)
	}
	defer clear(secret)

	th := blake3.NewDeriveKey(contextTranscript)
	if hs.first {
		th.Write(hs.localPropose)
		th.Write(hs.remotePropose)
		th.Write(hs.localExchange)
		th.Write(hs.remoteExchange)
	} else {
		th.Write(hs.remotePropose)
		th.Write(hs.localPropose)
		th.Write(hs.remoteExchange)
		th.Write(hs.localExchange)
	}
	th.Sum(hs.transcript[:0])

	material := make([]byte, 0, len(hs.transcript)+len(secret))
	material = append(material, hs.transcript[:]...)
	material = append(material, secret...)
	defer clear(material)
	kFirst := make([]byte, hs.suite.KeySize())
	kSecond := make([]byte, hs.suite.KeySize())
	defer clear(kFirst)
	defer clear(kSecond)
	blake3.DeriveKey(kFirst, contextKeyFirst, material)
	blake3.DeriveKey(kSecond, contextKeySecond, material)
	outKey, inKey := kFirst, kSecond
	if !hs.first {
		outKey, inKey = kSecond, kFirst
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

// signedMessage is what a side with the given role signs: a prefix, the
// role byte and the transcript hash.
func signedMessage(role byte, transcript [32]byte) []byte {
	m := make([]byte, 0, len(signaturePrefix)+1+len(transcript))
	m = append(m, signaturePrefix...)
	m = append(m, role)
	return append(m, transcript[:]...)
}

func (hs *handshakeState) roles() (local, remote byte) {
	if hs.first {
		return roleFirst, roleSecond
	}
	return roleSecond, roleFirst
}

// writeConfirm sends the first encrypted frame: the peer's nonce and the
// local signature over the transcript.
func (hs *handshakeState) writeConfirm() error {
	local, _ := hs.roles()
	sig := hs.cfg.key.Sign(signedMessage(local, hs.transcript))
	msg := appendConfirm(make([]byte, 0, confirmSize), hs.remote.nonce, sig)
	return hs.c.out.writeFrame(hs.c.conn, msg)
}

// readConfirm reads the peer's first frame and checks the echoed nonce, then
// the peer's signature.
func (hs *handshakeState) readConfirm() error {
	in := &hs.c.in
	if _, err := in.readFrame(hs.c.conn, nil); err != nil {
		return eofUnexpected(err)
	}
	pt := in.plain
	in.plain = nil
	defer in.settle()
	cf, err := parseConfirm(pt)
	if err != nil {
		return err
	}
	if cf.nonce != hs.localNonce {
		return ErrNonceMismatch
	}
	_, remote := hs.roles()
	if !hs.remotePub.Verify(signedMessage(remote, hs.transcript), cf.sig) {
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

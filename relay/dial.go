package relay

import (
	"bufio"
	"context"
	"fmt"
	"time"

	"github.com/tendril-p2p/tendril"
)

// Dial reaches c.Target through c.Relay and returns the session with it: it connects to
// the relay (reusing a session if there is one), asks for a circuit to the target, and
// runs the handshake through the circuit with svc.DialConn, which verifies the target's
// identity end to end: the relay carries only ciphertext and cannot pose as the target.
// If svc already has a session with the target, that session is returned.
//
// The session's RemoteAddr is RELAYTRANSPORT/p2p-circuit/p2p/TARGET (IsRelayed reports
// it); it lives within the relay's limits (Conn.Limits), and when the relay ends it the
// session's Err wraps a *CircuitError saying why. ctx bounds the whole dial. Refusals
// wrap ErrNoReservation, ErrResourceLimit, ErrRateLimited, ErrRefused or
// ErrConnectFailed.
func Dial(ctx context.Context, svc *tendril.Service, c Circuit) (*tendril.Session, error) {
	if s := svc.Session(c.Target); s != nil {
		return s, nil
	}
	conn, err := DialConn(ctx, svc, c)
	if err != nil {
		return nil, err
	}
	sess, err := svc.DialConn(ctx, conn, tendril.Addr{Transport: conn.RemoteMultiaddr(), Peer: c.Target})
	if err != nil {
		return nil, fmt.Errorf("relay: dial %s: %w", c, err)
	}
	return sess, nil
}

// DialConn opens a circuit to c.Target through c.Relay and returns it, before any
// handshake: the caller runs one on it (Dial runs svc.DialConn). The caller owns the Conn.
func DialConn(ctx context.Context, svc *tendril.Service, c Circuit) (*Conn, error) {
	if c.Relay.Peer.IsZero() || c.Target.IsZero() {
		return nil, fmt.Errorf("%w: %s: relay and target peer IDs are required", ErrInvalidCircuit, c)
	}
	if err := ensureOpener(svc, HopProtocol); err != nil {
		return nil, fmt.Errorf("relay: %w", err)
	}
	rs, err := svc.Dial(ctx, c.Relay)
	if err != nil {
		return nil, fmt.Errorf("relay: dial relay %s: %w", c.Relay, err)
	}
	st, _, err := rs.OpenStream(ctx, HopProtocol)
	if err != nil {
		return nil, fmt.Errorf("relay: %s: %w", c, err)
	}
	ok := false
	defer func() {
		if !ok {
			st.Reset()
		}
	}()
	stopWake := deadlineFrom(ctx, st, defaultAnswerWait)
	br := bufio.NewReaderSize(st, readBuffer)
	err = writeMsg(st, appendHopRequest(nil, hopRequest{typ: msgConnect, target: c.Target}))
	var body []byte
	if err == nil {
		body, err = readMsg(br)
	}
	var limits Limits
	if err == nil {
		limits, err = parseConnectAnswer(body)
	}
	stopWake()
	if err != nil {
		return nil, fmt.Errorf("relay: connect %s: %w", c, ctxErr(ctx, err))
	}
	st.SetDeadline(time.Time{})
	ok = true
	return newConn(st, br, c.Relay.Peer, c.Target, limits,
		circuitMultiaddr(rs.LocalAddr().Transport), circuitMultiaddr(rs.RemoteAddr().Transport)), nil
}

// defaultAnswerWait bounds a wait for a relay's answer when ctx has no deadline.
const defaultAnswerWait = 10 * time.Second

// deadlineFrom maps ctx onto conn's deadline (ctx's, or wait from now if it has none) and
// wakes conn when ctx ends; the returned func stops that.
func deadlineFrom(ctx context.Context, conn interface{ SetDeadline(time.Time) error }, wait time.Duration) func() bool {
	dl, ok := ctx.Deadline()
	if !ok {
		dl = time.Now().Add(wait)
	}
	conn.SetDeadline(dl)
	return context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
}

// ctxErr prefers ctx's error to the I/O error it caused.
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w (%w)", ctx.Err(), err)
	}
	return err
}

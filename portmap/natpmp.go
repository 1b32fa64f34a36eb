package portmap

// A NAT-PMP client (RFC 6886), written here rather than taken from
// github.com/jackpal/go-nat-pmp v1.1.0 because that client takes no context (a request
// retries for up to 128 s and Close could not interrupt it), always sends to port 5351
// through an unexported caller (no fake gateway on a loopback port in tests), reports
// refusals as strings (no result code to act on), and accepts a zero port or lifetime.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"
)

const (
	natpmpOpExternal = 0
	natpmpOpMapUDP   = 1
	natpmpOpMapTCP   = 2

	// natpmpFirstWait is the first retransmission interval; each doubles (section 3.1).
	natpmpFirstWait = 250 * time.Millisecond
	// natpmpMaxIgnored caps the packets a request reads that are not its answer (stale
	// answers, garbage from the gateway's address) before it gives up, so a flood costs a
	// bounded amount of work per request, not a deadline's worth.
	natpmpMaxIgnored = 32
)

// natpmpClient talks to one gateway. Each exchange has its own socket, so that answers
// to an earlier, abandoned request cannot be mistaken for the current one's.
type natpmpClient struct {
	gw      netip.AddrPort
	timeout time.Duration
}

// errIgnore marks a packet that is not the answer: keep waiting.
var errIgnore = errors.New("not the answer")

// exchange sends req until an answer that check accepts arrives, the timeout passes or
// ctx ends. check returns errIgnore for a packet to skip, or a final error.
func (c natpmpClient) exchange(ctx context.Context, req []byte, check func([]byte) error) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "udp4", c.gw.String())
	if err != nil {
		return nil, fmt.Errorf("%w: nat-pmp: %w", ErrUnreachable, err)
	}
	defer conn.Close()

	// dl orders the deadline the loop sets with the one ctx's end sets, so that a
	// Close is never held up by a retransmission interval.
	var dl struct {
		sync.Mutex
		done bool
	}
	stop := context.AfterFunc(ctx, func() {
		dl.Lock()
		dl.done = true
		dl.Unlock()
		conn.SetDeadline(time.Unix(1, 0))
	})
	defer stop()
	setDeadline := func(t time.Time) bool {
		dl.Lock()
		defer dl.Unlock()
		if dl.done {
			return false
		}
		conn.SetDeadline(t)
		return true
	}

	buf := make([]byte, 64) // answers are 12 or 16 bytes; longer ones are ignored
	ignored := 0
	for wait := natpmpFirstWait; ; wait *= 2 {
		if !setDeadline(time.Now().Add(wait)) {
			return nil, ctxErr(ctx)
		}
		if _, err := conn.Write(req); err != nil {
			if ctx.Err() != nil {
				return nil, ctxErr(ctx)
			}
			return nil, fmt.Errorf("%w: nat-pmp: %w", ErrUnreachable, err)
		}
		for {
			n, err := conn.Read(buf)
			if err != nil {
				var ne net.Error
				if ctx.Err() != nil {
					return nil, ctxErr(ctx)
				}
				if errors.As(err, &ne) && ne.Timeout() {
					break // retransmit
				}
				// An ICMP port unreachable shows up as ECONNREFUSED on the next read:
				// nothing listens on the gateway.
				return nil, fmt.Errorf("%w: nat-pmp: %w", ErrUnreachable, err)
			}
			err = check(buf[:n])
			if err == nil {
				return buf[:n], nil
			}
			if !errors.Is(err, errIgnore) {
				return nil, err
			}
			if ignored++; ignored > natpmpMaxIgnored {
				return nil, fmt.Errorf("%w: nat-pmp: %d packets that were not an answer", ErrBadResponse, ignored)
			}
		}
	}
}

// ctxErr turns the end of an exchange's context into this package's error.
func ctxErr(ctx context.Context) error {
	if errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
		return ErrTimeout
	}
	return context.Cause(ctx)
}

// checkNATPMP is the common part of an answer's checks (section 3.5): version 0, the
// request's opcode with the top bit set, a zero result code, the expected size.
func checkNATPMP(b []byte, op byte, size int) error {
	if len(b) < 4 {
		return errIgnore
	}
	if b[1] != 0x80|op {
		return errIgnore
	}
	if b[0] != 0 {
		// A PCP server answers a NAT-PMP request with version 2 (RFC 6887 section 9).
		return fmt.Errorf("%w: nat-pmp: answer has version %d", ErrBadResponse, b[0])
	}
	if code := binary.BigEndian.Uint16(b[2:4]); code != 0 {
		return &GatewayError{Method: NATPMP, Code: int(code)}
	}
	if len(b) != size {
		return fmt.Errorf("%w: nat-pmp: answer of %d bytes, want %d", ErrBadResponse, len(b), size)
	}
	return nil
}

// externalAddress asks the gateway for its external address (section 3.2).
func (c natpmpClient) externalAddress(ctx context.Context) (netip.Addr, error) {
	b, err := c.exchange(ctx, []byte{0, natpmpOpExternal}, func(b []byte) error {
		return checkNATPMP(b, natpmpOpExternal, 12)
	})
	if err != nil {
		return netip.Addr{}, err
	}
	return netip.AddrFrom4([4]byte(b[8:12])), nil
}

// mapPort asks for a mapping of internal to suggested (0: any) for lifetime seconds, or
// with lifetime 0 and suggested 0 deletes this host's mappings of internal (section 3.4).
// It returns the external port and lifetime granted.
func (c natpmpClient) mapPort(ctx context.Context, proto string, internal, suggested uint16, lifetime uint32) (uint16, uint32, error) {
	op := byte(natpmpOpMapTCP)
	if proto == "udp" {
		op = natpmpOpMapUDP
	}
	req := make([]byte, 12)
	req[1] = op
	binary.BigEndian.PutUint16(req[4:], internal)
	binary.BigEndian.PutUint16(req[6:], suggested)
	binary.BigEndian.PutUint32(req[8:], lifetime)
	b, err := c.exchange(ctx, req, func(b []byte) error {
		if err := checkNATPMP(b, op, 16); err != nil {
			return err
		}
		if binary.BigEndian.Uint16(b[8:10]) != internal {
			return errIgnore // an answer about another port: not ours
		}
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	ext, granted := binary.BigEndian.Uint16(b[10:12]), binary.BigEndian.Uint32(b[12:16])
	if lifetime > 0 && (ext == 0 || granted == 0) {
		return 0, 0, fmt.Errorf("%w: nat-pmp: granted port %d for %d s", ErrBadResponse, ext, granted)
	}
	return ext, granted, nil
}

// natpmpBackend maps one port with NAT-PMP.
type natpmpBackend struct {
	c        natpmpClient
	proto    string
	internal uint16
	lease    time.Duration
}

func (b *natpmpBackend) method() Method      { return NATPMP }
func (b *natpmpBackend) gateway() netip.Addr { return b.c.gw.Addr() }

func (b *natpmpBackend) add(ctx context.Context, prev uint16) (netip.AddrPort, time.Duration, error) {
	ip, err := b.c.externalAddress(ctx)
	if err != nil {
		return netip.AddrPort{}, 0, err
	}
	want := prev
	if want == 0 {
		want = b.internal
	}
	// The gateway may assign another port than the one suggested (section 3.3): take it.
	ext, granted, err := b.c.mapPort(ctx, b.proto, b.internal, want, uint32(b.lease/time.Second))
	if err != nil {
		return netip.AddrPort{}, 0, err
	}
	return netip.AddrPortFrom(ip, ext), time.Duration(granted) * time.Second, nil
}

func (b *natpmpBackend) remove(ctx context.Context, _ uint16) error {
	_, _, err := b.c.mapPort(ctx, b.proto, b.internal, 0, 0)
	return err
}

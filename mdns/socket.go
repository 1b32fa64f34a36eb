package mdns

import (
	"context"
	"net"
	"net/netip"

	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

// mDNS's well-known port and groups (RFC 6762 section 3).
const mdnsPort = 5353

var (
	group4 = netip.AddrPortFrom(netip.MustParseAddr("224.0.0.251"), mdnsPort)
	group6 = netip.AddrPortFrom(netip.MustParseAddr("ff02::fb"), mdnsPort)
)

// family is an IP version: the Service runs one socket per family.
type family uint8

const (
	v4 family = 4
	v6 family = 6
)

func (f family) String() string {
	if f == v4 {
		return "ipv4"
	}
	return "ipv6"
}

// mconn is one family's socket: bound to the wildcard address on port 5353 with
// SO_REUSEADDR and SO_REUSEPORT, so several processes on one host (other responders, other
// tendril nodes, tests) share the port and each gets every multicast; joined to the group
// on each interface in use; told which interface each packet came in on; and sending to
// the group out of a chosen interface, looped back to the host, with TTL 255 (RFC 6762
// section 11: receivers may check it).
type mconn struct {
	fam   family
	c     net.PacketConn
	p4    *ipv4.PacketConn
	p6    *ipv6.PacketConn
	group *net.UDPAddr
}

func listen(ctx context.Context, fam family) (*mconn, error) {
	lc := net.ListenConfig{Control: reusePort}
	m := &mconn{fam: fam}
	var err error
	if fam == v4 {
		m.group = net.UDPAddrFromAddrPort(group4)
		if m.c, err = lc.ListenPacket(ctx, "udp4", "0.0.0.0:5353"); err != nil {
			return nil, err
		}
		m.p4 = ipv4.NewPacketConn(m.c)
		err = firstErr(
			m.p4.SetControlMessage(ipv4.FlagInterface, true),
			m.p4.SetMulticastLoopback(true),
			m.p4.SetMulticastTTL(255),
			m.p4.SetTTL(255),
		)
	} else {
		m.group = net.UDPAddrFromAddrPort(group6)
		if m.c, err = lc.ListenPacket(ctx, "udp6", "[::]:5353"); err != nil {
			return nil, err
		}
		m.p6 = ipv6.NewPacketConn(m.c)
		err = firstErr(
			m.p6.SetControlMessage(ipv6.FlagInterface, true),
			m.p6.SetMulticastLoopback(true),
			m.p6.SetMulticastHopLimit(255),
			m.p6.SetHopLimit(255),
		)
	}
	if err != nil {
		m.c.Close()
		return nil, err
	}
	return m, nil
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// read returns one datagram, the index of the interface it arrived on (0 if unknown) and
// its source.
func (m *mconn) read(b []byte) (n, ifIndex int, src netip.AddrPort, err error) {
	var from net.Addr
	if m.fam == v4 {
		var cm *ipv4.ControlMessage
		n, cm, from, err = m.p4.ReadFrom(b)
		if cm != nil {
			ifIndex = cm.IfIndex
		}
	} else {
		var cm *ipv6.ControlMessage
		n, cm, from, err = m.p6.ReadFrom(b)
		if cm != nil {
			ifIndex = cm.IfIndex
		}
	}
	if ua, ok := from.(*net.UDPAddr); ok {
		src = ua.AddrPort()
	}
	return n, ifIndex, src, err
}

// write multicasts b out of the interface ifIndex.
func (m *mconn) write(b []byte, ifIndex int) error {
	var err error
	if m.fam == v4 {
		_, err = m.p4.WriteTo(b, &ipv4.ControlMessage{IfIndex: ifIndex}, m.group)
	} else {
		_, err = m.p6.WriteTo(b, &ipv6.ControlMessage{IfIndex: ifIndex}, m.group)
	}
	return err
}

func (m *mconn) join(ifi *net.Interface) error {
	if m.fam == v4 {
		return m.p4.JoinGroup(ifi, m.group)
	}
	return m.p6.JoinGroup(ifi, m.group)
}

func (m *mconn) leave(ifi *net.Interface) error {
	if m.fam == v4 {
		return m.p4.LeaveGroup(ifi, m.group)
	}
	return m.p6.LeaveGroup(ifi, m.group)
}

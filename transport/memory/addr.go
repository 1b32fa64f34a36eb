package memory

import (
	"encoding/binary"
	"strconv"

	ma "github.com/multiformats/go-multiaddr"
)

// Addr is the net.Addr of an in-memory endpoint: its number N, the multiaddr /memory/N.
// It is not a *net.TCPAddr on purpose: code that limits connections per IP address
// (tendril's admission) sees none here and counts them only against global limits.
type Addr uint64

// Network returns "memory".
func (a Addr) Network() string { return "memory" }

// String returns "/memory/N".
func (a Addr) String() string { return "/memory/" + strconv.FormatUint(uint64(a), 10) }

// Multiaddr returns /memory/N.
func (a Addr) Multiaddr() ma.Multiaddr {
	c, err := ma.NewComponent("memory", strconv.FormatUint(uint64(a), 10))
	if err != nil {
		// Every uint64 is a valid /memory value; this cannot happen.
		panic("memory: " + err.Error())
	}
	return ma.Multiaddr{*c}
}

// parse returns N of the multiaddr /memory/N; ok is false for any other multiaddr (more
// components, another protocol).
func parse(addr ma.Multiaddr) (n uint64, ok bool) {
	if len(addr) != 1 || addr[0].Code() != ma.P_MEMORY {
		return 0, false
	}
	v := addr[0].RawValue()
	if len(v) != 8 {
		return 0, false
	}
	return binary.BigEndian.Uint64(v), true
}

package proxyhdr

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"net/netip"
)

// maxV2 bounds a v2 header, fixed part included. The format allows 16+65535 bytes; what
// proxies send is the addresses (at most 216 bytes) and a few TLVs (ALPN, SNI, a unique
// ID of at most 128 bytes, TLS details, a cloud's endpoint ID), well under this.
const maxV2 = 4096

// v2 header fields (the 13th to 16th bytes, after the signature).
const (
	v2Version = 0x20 // high nibble of the 13th byte; the only version there is

	cmdLocal = 0x0
	cmdProxy = 0x1

	// The 14th byte: the address family in the high nibble, the transport in the low.
	famUnspec = 0x00
	famTCP4   = 0x11
	famUDP4   = 0x12
	famTCP6   = 0x21
	famUDP6   = 0x22
	famUnixS  = 0x31
	famUnixD  = 0x32

	tlvCRC32C = 0x03
)

var (
	castagnoli = crc32.MakeTable(crc32.Castagnoli)
	zero4      [4]byte // the checksum field as it is summed
)

// readV2 reads the rest of a v2 header after its signature: 4 bytes, then exactly the
// length they announce.
func readV2(r io.Reader) (Header, error) {
	var fixed [4]byte
	if _, err := io.ReadFull(r, fixed[:]); err != nil {
		return Header{}, readErr("v2 header", err)
	}
	verCmd, fam := fixed[0], fixed[1]
	n := int(binary.BigEndian.Uint16(fixed[2:]))
	if verCmd&0xf0 != v2Version {
		return Header{}, fmt.Errorf("%w: v2: version %d", ErrMalformed, verCmd>>4)
	}
	cmd := verCmd & 0x0f
	if cmd != cmdLocal && cmd != cmdProxy {
		return Header{}, fmt.Errorf("%w: v2: unknown command %#x", ErrMalformed, cmd)
	}
	if len(sigV2)+len(fixed)+n > maxV2 {
		return Header{}, fmt.Errorf("%w: v2 header of %d bytes, more than %d", ErrMalformed, len(sigV2)+len(fixed)+n, maxV2)
	}
	// The whole header in one buffer, for the checksum, which covers all of it; it is
	// dropped when Read returns.
	hdr := make([]byte, len(sigV2)+len(fixed)+n)
	copy(hdr, sigV2[:])
	copy(hdr[len(sigV2):], fixed[:])
	if _, err := io.ReadFull(r, hdr[len(sigV2)+len(fixed):]); err != nil {
		return Header{}, readErr("v2 addresses", err)
	}
	if cmd == cmdLocal {
		// The specification: use the real endpoints, discard the block, family included.
		return Header{Local: true, Version: 2}, nil
	}
	return parseV2Proxy(hdr, fam)
}

// parseV2Proxy parses the block of a v2 PROXY command (hdr is the whole header).
func parseV2Proxy(hdr []byte, fam byte) (Header, error) {
	block := hdr[len(sigV2)+4:]
	var addrLen int
	switch fam {
	case famUnspec:
		// Nothing to read from the block; the specification has the receiver ignore it.
		return Header{Local: true, Version: 2}, nil
	case famTCP4, famUDP4:
		addrLen = 2*4 + 2*2
	case famTCP6, famUDP6:
		addrLen = 2*16 + 2*2
	case famUnixS, famUnixD:
		addrLen = 2 * 108
	default:
		return Header{}, fmt.Errorf("%w: v2: unknown family and protocol %#02x", ErrMalformed, fam)
	}
	if len(block) < addrLen {
		return Header{}, fmt.Errorf("%w: v2: %d bytes of addresses for family %#02x, want at least %d", ErrMalformed, len(block), fam, addrLen)
	}
	if err := checkTLVs(hdr, len(hdr)-len(block)+addrLen); err != nil {
		return Header{}, err
	}
	h := Header{Version: 2}
	switch fam {
	case famTCP4:
		a := block[:addrLen]
		h.Source = netip.AddrPortFrom(netip.AddrFrom4([4]byte(a[0:4])), binary.BigEndian.Uint16(a[8:]))
		h.Destination = netip.AddrPortFrom(netip.AddrFrom4([4]byte(a[4:8])), binary.BigEndian.Uint16(a[10:]))
	case famTCP6:
		a := block[:addrLen]
		h.Source = netip.AddrPortFrom(netip.AddrFrom16([16]byte(a[0:16])), binary.BigEndian.Uint16(a[32:]))
		h.Destination = netip.AddrPortFrom(netip.AddrFrom16([16]byte(a[16:32])), binary.BigEndian.Uint16(a[34:]))
	default:
		// UDP or a Unix socket: no client address a TCP connection can take. The
		// specification lets a receiver that does not support a valid family fall back to
		// the real endpoints.
		h.Local = true
	}
	return h, nil
}

// checkTLVs checks that the TLVs from hdr[off:] fill the header exactly, and verifies
// the CRC32c TLV if there is one: a checksum is there to catch a damaged header, and the
// specification requires a receiver that knows it to drop a header that fails it.
func checkTLVs(hdr []byte, off int) error {
	crcAt := -1
	for off < len(hdr) {
		if len(hdr)-off < 3 {
			return fmt.Errorf("%w: v2: %d stray bytes after the TLVs", ErrMalformed, len(hdr)-off)
		}
		typ, n := hdr[off], int(binary.BigEndian.Uint16(hdr[off+1:]))
		off += 3
		if n > len(hdr)-off {
			return fmt.Errorf("%w: v2: TLV %#02x of %d bytes overruns the header", ErrMalformed, typ, n)
		}
		if typ == tlvCRC32C {
			if n != 4 || crcAt >= 0 {
				return fmt.Errorf("%w: v2: bad or repeated CRC32c TLV", ErrMalformed)
			}
			crcAt = off
		}
		off += n
	}
	if crcAt < 0 {
		return nil
	}
	want := binary.BigEndian.Uint32(hdr[crcAt:])
	c := crc32.Update(0, castagnoli, hdr[:crcAt])
	c = crc32.Update(c, castagnoli, zero4[:])
	c = crc32.Update(c, castagnoli, hdr[crcAt+4:])
	if c != want {
		return fmt.Errorf("%w: v2: CRC32c %#08x, header sums to %#08x", ErrMalformed, want, c)
	}
	return nil
}

package proxyhdr

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"testing"
	"testing/iotest"
)

// v2 builds a v2 header: signature, version and command, family, length, block.
func v2(verCmd, fam byte, block ...[]byte) []byte {
	b := append([]byte{}, sigV2[:]...)
	b = append(b, verCmd, fam, 0, 0)
	for _, p := range block {
		b = append(b, p...)
	}
	binary.BigEndian.PutUint16(b[14:], uint16(len(b)-16))
	return b
}

func tlv(typ byte, value []byte) []byte {
	return append([]byte{typ, byte(len(value) >> 8), byte(len(value))}, value...)
}

// withCRC appends a CRC32c TLV to a header and fills it in as a sender does.
func withCRC(hdr []byte) []byte {
	hdr = v2(hdr[12], hdr[13], hdr[16:], tlv(tlvCRC32C, make([]byte, 4)))
	sum := crc32.Checksum(hdr, crc32.MakeTable(crc32.Castagnoli))
	binary.BigEndian.PutUint32(hdr[len(hdr)-4:], sum)
	return hdr
}

var (
	// TCP over IPv4: 192.0.2.1:4711 -> 198.51.100.2:443.
	inet4 = []byte{192, 0, 2, 1, 198, 51, 100, 2, 0x12, 0x67, 0x01, 0xbb}
	// TCP over IPv6: [2001:db8::1]:4711 -> [2001:db8::2]:443.
	inet6 = []byte{
		0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1,
		0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2,
		0x12, 0x67, 0x01, 0xbb,
	}
	unixAddrs = make([]byte, 216)

	want4 = Header{Source: ap("192.0.2.1:4711"), Destination: ap("198.51.100.2:443"), Version: 2}
	want6 = Header{Source: ap("[2001:db8::1]:4711"), Destination: ap("[2001:db8::2]:443"), Version: 2}
	local = Header{Local: true, Version: 2}
)

func TestV2(t *testing.T) {
	big := bytes.Repeat([]byte{'x'}, maxV2-16-len(inet4)-3)
	for _, tc := range []struct {
		name string
		hdr  []byte
		want Header
	}{
		{"TCP4", v2(0x21, famTCP4, inet4), want4},
		{"TCP6", v2(0x21, famTCP6, inet6), want6},
		{"TCP6 mapped IPv4", v2(0x21, famTCP6, append([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 1}, inet6[16:]...)),
			Header{Source: ap("[::ffff:192.0.2.1]:4711"), Destination: want6.Destination, Version: 2}},
		{"LOCAL", v2(0x20, famUnspec), local},
		{"LOCAL with addresses", v2(0x20, famTCP4, inet4), local},
		{"LOCAL ignores the family", v2(0x20, 0xff, []byte("anything")), local},
		{"PROXY UNSPEC", v2(0x21, famUnspec, []byte("ignored")), local},
		{"UDP4 falls back", v2(0x21, famUDP4, inet4), local},
		{"UDP6 falls back", v2(0x21, famUDP6, inet6), local},
		{"Unix stream falls back", v2(0x21, famUnixS, unixAddrs), local},
		{"Unix datagram falls back", v2(0x21, famUnixD, unixAddrs), local},
		{"TLVs", v2(0x21, famTCP4, inet4, tlv(0x01, []byte("h2")), tlv(0x04, nil), tlv(0x05, bytes.Repeat([]byte{7}, 128)), tlv(0xea, []byte("vpce-123"))), want4},
		{"empty TLV", v2(0x21, famTCP6, inet6, tlv(0x04, nil)), want6},
		{"CRC32c", withCRC(v2(0x21, famTCP4, inet4, tlv(0x02, []byte("example.com")))), want4},
		{"CRC32c on UDP", withCRC(v2(0x21, famUDP6, inet6)), local},
		{"largest", v2(0x21, famTCP4, inet4, tlv(0xe0, big)), want4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkRead(t, tc.hdr, tc.want)
		})
	}
	if n := len(v2(0x21, famTCP4, inet4, tlv(0xe0, big))); n != maxV2 {
		t.Errorf("largest header has %d bytes, want %d", n, maxV2)
	}
}

func TestV2Malformed(t *testing.T) {
	badCRC := withCRC(v2(0x21, famTCP4, inet4))
	badCRC[len(badCRC)-1] ^= 1
	flipped := withCRC(v2(0x21, famTCP4, inet4))
	flipped[16] ^= 0x80 // the source address, under a checksum that no longer matches
	big := bytes.Repeat([]byte{'x'}, maxV2-16-len(inet4)-3+1)
	for _, tc := range []struct {
		name string
		hdr  []byte
	}{
		{"version 1", v2(0x11, famTCP4, inet4)},
		{"version 3", v2(0x31, famTCP4, inet4)},
		{"version 0", v2(0x01, famTCP4, inet4)},
		{"command 2", v2(0x22, famTCP4, inet4)},
		{"command 15", v2(0x2f, famTCP4, inet4)},
		{"family 4", v2(0x21, 0x41, inet4)},
		{"protocol 3", v2(0x21, 0x13, inet4)},
		{"INET without protocol", v2(0x21, 0x10, inet4)},
		{"UNSPEC family with STREAM", v2(0x21, 0x01, inet4)},
		{"short IPv4 block", v2(0x21, famTCP4, inet4[:11])},
		{"IPv4 block as IPv6", v2(0x21, famTCP6, inet4)},
		{"short Unix block", v2(0x21, famUnixS, unixAddrs[:215])},
		{"short UDP block", v2(0x21, famUDP4, inet4[:11])},
		{"stray byte", v2(0x21, famTCP4, inet4, []byte{1})},
		{"stray two bytes", v2(0x21, famTCP4, inet4, []byte{1, 0})},
		{"TLV overrun", v2(0x21, famTCP4, inet4, []byte{1, 0, 3, 'h', '2'})},
		{"TLV after a good one overruns", v2(0x21, famTCP4, inet4, tlv(4, nil), []byte{1, 0xff, 0xff})},
		{"bad CRC32c", badCRC},
		{"CRC32c over a changed address", flipped},
		{"short CRC32c", v2(0x21, famTCP4, inet4, tlv(tlvCRC32C, []byte{1, 2, 3}))},
		{"long CRC32c", v2(0x21, famTCP4, inet4, tlv(tlvCRC32C, []byte{1, 2, 3, 4, 5}))},
		{"two CRC32c", withCRC(v2(0x21, famTCP4, inet4, tlv(tlvCRC32C, make([]byte, 4))))},
		{"longer than 4 KiB", v2(0x21, famTCP4, inet4, tlv(0xe0, big))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkMalformed(t, tc.hdr)
		})
	}
}

// TestV2Oversized checks that a header announcing more than maxV2 bytes is refused after
// its 16 fixed bytes, before anything of its block is read (or allocated).
func TestV2Oversized(t *testing.T) {
	hdr := v2(0x21, famTCP4, inet4)
	binary.BigEndian.PutUint16(hdr[14:], 0xffff)
	r := bytes.NewReader(append(hdr, make([]byte, 0xffff)...))
	if _, _, _, err := Read(r); !errors.Is(err, ErrMalformed) {
		t.Fatalf("65535-byte block: %v", err)
	}
	if read := int(r.Size()) - r.Len(); read != 16 {
		t.Errorf("read %d bytes, want the 16 fixed ones", read)
	}
}

// TestV2Truncated checks every cut of a valid header.
func TestV2Truncated(t *testing.T) {
	hdr := withCRC(v2(0x21, famTCP6, inet6, tlv(1, []byte("h2"))))
	for n := len(sigV2); n < len(hdr); n++ {
		_, _, isProxy, err := Read(bytes.NewReader(hdr[:n]))
		if !isProxy || !errors.Is(err, ErrMalformed) || !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("%d of %d bytes: %v, %v; want ErrMalformed and io.ErrUnexpectedEOF", n, len(hdr), isProxy, err)
		}
	}
}

// TestV2AtEnd checks a header that ends the stream, its last byte delivered with io.EOF.
func TestV2AtEnd(t *testing.T) {
	h, _, _, err := Read(iotest.DataErrReader(bytes.NewReader(v2(0x21, famTCP4, inet4))))
	if err != nil || h != want4 {
		t.Errorf("Read = %+v, %v; want %+v", h, err, want4)
	}
}

package tea

import "encoding/binary"

// The 16 TEA cycles are written out with their round sums i*delta
// (delta = 0x9e3779b9, i = 1..16) as constants, in both chain loops, so the
// compiler keeps the whole state in registers. Every cycle is the same
// expression; only the constant changes.

// encryptChain enciphers buf in place (len(buf) a multiple of 8) with the QQ
// chaining: x_i = p_i ^ c_(i-1); c_i = E(x_i) ^ x_(i-1), all state starting at
// zero.
func encryptChain(k *[4]uint32, buf []byte) {
	k0, k1, k2, k3 := k[0], k[1], k[2], k[3]
	var cprev, xprev uint64
	for len(buf) >= 8 {
		x := binary.BigEndian.Uint64(buf) ^ cprev
		v0, v1 := uint32(x>>32), uint32(x)
		v0 += ((v1 << 4) + k0) ^ (v1 + 0x9e3779b9) ^ ((v1 >> 5) + k1)
		v1 += ((v0 << 4) + k2) ^ (v0 + 0x9e3779b9) ^ ((v0 >> 5) + k3)
		v0 += ((v1 << 4) + k0) ^ (v1 + 0x3c6ef372) ^ ((v1 >> 5) + k1)
		v1 += ((v0 << 4) + k2) ^ (v0 + 0x3c6ef372) ^ ((v0 >> 5) + k3)
		v0 += ((v1 << 4) + k0) ^ (v1 + 0xdaa66d2b) ^ ((v1 >> 5) + k1)
		v1 += ((v0 << 4) + k2) ^ (v0 + 0xdaa66d2b) ^ ((v0 >> 5) + k3)
		v0 += ((v1 << 4) + k0) ^ (v1 + 0x78dde6e4) ^ ((v1 >> 5) + k1)
		v1 += ((v0 << 4) + k2) ^ (v0 + 0x78dde6e4) ^ ((v0 >> 5) + k3)
		v0 += ((v1 << 4) + k0) ^ (v1 + 0x1715609d) ^ ((v1 >> 5) + k1)
		v1 += ((v0 << 4) + k2) ^ (v0 + 0x1715609d) ^ ((v0 >> 5) + k3)
		v0 += ((v1 << 4) + k0) ^ (v1 + 0xb54cda56) ^ ((v1 >> 5) + k1)
		v1 += ((v0 << 4) + k2) ^ (v0 + 0xb54cda56) ^ ((v0 >> 5) + k3)
		v0 += ((v1 << 4) + k0) ^ (v1 + 0x5384540f) ^ ((v1 >> 5) + k1)
		v1 += ((v0 << 4) + k2) ^ (v0 + 0x5384540f) ^ ((v0 >> 5) + k3)
		v0 += ((v1 << 4) + k0) ^ (v1 + 0xf1bbcdc8) ^ ((v1 >> 5) + k1)
		v1 += ((v0 << 4) + k2) ^ (v0 + 0xf1bbcdc8) ^ ((v0 >> 5) + k3)
		v0 += ((v1 << 4) + k0) ^ (v1 + 0x8ff34781) ^ ((v1 >> 5) + k1)
		v1 += ((v0 << 4) + k2) ^ (v0 + 0x8ff34781) ^ ((v0 >> 5) + k3)
		v0 += ((v1 << 4) + k0) ^ (v1 + 0x2e2ac13a) ^ ((v1 >> 5) + k1)
		v1 += ((v0 << 4) + k2) ^ (v0 + 0x2e2ac13a) ^ ((v0 >> 5) + k3)
		v0 += ((v1 << 4) + k0) ^ (v1 + 0xcc623af3) ^ ((v1 >> 5) + k1)
		v1 += ((v0 << 4) + k2) ^ (v0 + 0xcc623af3) ^ ((v0 >> 5) + k3)
		v0 += ((v1 << 4) + k0) ^ (v1 + 0x6a99b4ac) ^ ((v1 >> 5) + k1)
		v1 += ((v0 << 4) + k2) ^ (v0 + 0x6a99b4ac) ^ ((v0 >> 5) + k3)
		v0 += ((v1 << 4) + k0) ^ (v1 + 0x08d12e65) ^ ((v1 >> 5) + k1)
		v1 += ((v0 << 4) + k2) ^ (v0 + 0x08d12e65) ^ ((v0 >> 5) + k3)
		v0 += ((v1 << 4) + k0) ^ (v1 + 0xa708a81e) ^ ((v1 >> 5) + k1)
		v1 += ((v0 << 4) + k2) ^ (v0 + 0xa708a81e) ^ ((v0 >> 5) + k3)
		v0 += ((v1 << 4) + k0) ^ (v1 + 0x454021d7) ^ ((v1 >> 5) + k1)
		v1 += ((v0 << 4) + k2) ^ (v0 + 0x454021d7) ^ ((v0 >> 5) + k3)
		v0 += ((v1 << 4) + k0) ^ (v1 + 0xe3779b90) ^ ((v1 >> 5) + k1)
		v1 += ((v0 << 4) + k2) ^ (v0 + 0xe3779b90) ^ ((v0 >> 5) + k3)
		c := (uint64(v0)<<32 | uint64(v1)) ^ xprev
		binary.BigEndian.PutUint64(buf, c)
		xprev, cprev = x, c
		buf = buf[8:]
	}
}

// decryptChain deciphers src into dst (len(dst) >= len(src), len(src) a
// multiple of 8): x_i = D(c_i ^ x_(i-1)); p_i = x_i ^ c_(i-1). dst and src may
// be the same slice: each block is read before it is written.
func decryptChain(k *[4]uint32, dst, src []byte) {
	k0, k1, k2, k3 := k[0], k[1], k[2], k[3]
	var cprev, xprev uint64
	for len(src) >= 8 && len(dst) >= 8 {
		c := binary.BigEndian.Uint64(src)
		x := c ^ xprev
		v0, v1 := uint32(x>>32), uint32(x)
		v1 -= ((v0 << 4) + k2) ^ (v0 + 0xe3779b90) ^ ((v0 >> 5) + k3)
		v0 -= ((v1 << 4) + k0) ^ (v1 + 0xe3779b90) ^ ((v1 >> 5) + k1)
		v1 -= ((v0 << 4) + k2) ^ (v0 + 0x454021d7) ^ ((v0 >> 5) + k3)
		v0 -= ((v1 << 4) + k0) ^ (v1 + 0x454021d7) ^ ((v1 >> 5) + k1)
		v1 -= ((v0 << 4) + k2) ^ (v0 + 0xa708a81e) ^ ((v0 >> 5) + k3)
		v0 -= ((v1 << 4) + k0) ^ (v1 + 0xa708a81e) ^ ((v1 >> 5) + k1)
		v1 -= ((v0 << 4) + k2) ^ (v0 + 0x08d12e65) ^ ((v0 >> 5) + k3)
		v0 -= ((v1 << 4) + k0) ^ (v1 + 0x08d12e65) ^ ((v1 >> 5) + k1)
		v1 -= ((v0 << 4) + k2) ^ (v0 + 0x6a99b4ac) ^ ((v0 >> 5) + k3)
		v0 -= ((v1 << 4) + k0) ^ (v1 + 0x6a99b4ac) ^ ((v1 >> 5) + k1)
		v1 -= ((v0 << 4) + k2) ^ (v0 + 0xcc623af3) ^ ((v0 >> 5) + k3)
		v0 -= ((v1 << 4) + k0) ^ (v1 + 0xcc623af3) ^ ((v1 >> 5) + k1)
		v1 -= ((v0 << 4) + k2) ^ (v0 + 0x2e2ac13a) ^ ((v0 >> 5) + k3)
		v0 -= ((v1 << 4) + k0) ^ (v1 + 0x2e2ac13a) ^ ((v1 >> 5) + k1)
		v1 -= ((v0 << 4) + k2) ^ (v0 + 0x8ff34781) ^ ((v0 >> 5) + k3)
		v0 -= ((v1 << 4) + k0) ^ (v1 + 0x8ff34781) ^ ((v1 >> 5) + k1)
		v1 -= ((v0 << 4) + k2) ^ (v0 + 0xf1bbcdc8) ^ ((v0 >> 5) + k3)
		v0 -= ((v1 << 4) + k0) ^ (v1 + 0xf1bbcdc8) ^ ((v1 >> 5) + k1)
		v1 -= ((v0 << 4) + k2) ^ (v0 + 0x5384540f) ^ ((v0 >> 5) + k3)
		v0 -= ((v1 << 4) + k0) ^ (v1 + 0x5384540f) ^ ((v1 >> 5) + k1)
		v1 -= ((v0 << 4) + k2) ^ (v0 + 0xb54cda56) ^ ((v0 >> 5) + k3)
		v0 -= ((v1 << 4) + k0) ^ (v1 + 0xb54cda56) ^ ((v1 >> 5) + k1)
		v1 -= ((v0 << 4) + k2) ^ (v0 + 0x1715609d) ^ ((v0 >> 5) + k3)
		v0 -= ((v1 << 4) + k0) ^ (v1 + 0x1715609d) ^ ((v1 >> 5) + k1)
		v1 -= ((v0 << 4) + k2) ^ (v0 + 0x78dde6e4) ^ ((v0 >> 5) + k3)
		v0 -= ((v1 << 4) + k0) ^ (v1 + 0x78dde6e4) ^ ((v1 >> 5) + k1)
		v1 -= ((v0 << 4) + k2) ^ (v0 + 0xdaa66d2b) ^ ((v0 >> 5) + k3)
		v0 -= ((v1 << 4) + k0) ^ (v1 + 0xdaa66d2b) ^ ((v1 >> 5) + k1)
		v1 -= ((v0 << 4) + k2) ^ (v0 + 0x3c6ef372) ^ ((v0 >> 5) + k3)
		v0 -= ((v1 << 4) + k0) ^ (v1 + 0x3c6ef372) ^ ((v1 >> 5) + k1)
		v1 -= ((v0 << 4) + k2) ^ (v0 + 0x9e3779b9) ^ ((v0 >> 5) + k3)
		v0 -= ((v1 << 4) + k0) ^ (v1 + 0x9e3779b9) ^ ((v1 >> 5) + k1)
		x = uint64(v0)<<32 | uint64(v1)
		binary.BigEndian.PutUint64(dst, x^cprev)
		xprev, cprev = x, c
		src, dst = src[8:], dst[8:]
	}
}

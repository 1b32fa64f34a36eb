package tea

import "encoding/binary"

// The 16 TEA cycles are written out with their round sums i*delta
// (delta = 0x9e3779b9, i = 1..16) as constants, in both chain loops, so the
// compiler keeps the whole state in registers.
//
// Each half-round computes f = ((s<<4)+ka) ^ (s+sum) ^ ((s>>5)+kc) of the
// value s that the previous half-round just updated (t op= f), and adds it
// into the other word. To shorten the dependency chain, two of the three
// terms are taken from s's value o before its update and the update f:
// (s<<4)+ka == ((o<<4)+ka) op (f<<4) and s+sum == (o+sum) op f (op being +
// when encrypting and - when decrypting), so that only the third term waits
// for s itself. That makes a half-round 4 dependent operations instead of 5.

// encryptChainGeneric enciphers buf in place (len(buf) a multiple of 8) with the QQ
// chaining: x_i = p_i ^ c_(i-1); c_i = E(x_i) ^ x_(i-1), all state starting at
// zero.
func encryptChainGeneric(k *[4]uint32, buf []byte) {
	encryptChainFromGeneric(k, buf, 0, 0)
}

// encryptChainFromGeneric is encryptChainGeneric continuing a message whose
// previous ciphertext block was cprev and previous cipher input xprev.
func encryptChainFromGeneric(k *[4]uint32, buf []byte, cprev, xprev uint64) {
	k0, k1, k2, k3 := k[0], k[1], k[2], k[3]
	for len(buf) >= 8 {
		x := binary.BigEndian.Uint64(buf) ^ cprev
		v0, v1 := uint32(x>>32), uint32(x)
		f := ((v1 << 4) + k0) ^ (v1 + 0x9e3779b9) ^ ((v1 >> 5) + k1)
		o := v0
		v0 += f
		f = (((o << 4) + k2) + (f << 4)) ^ ((o + 0x9e3779b9) + f) ^ ((v0 >> 5) + k3)
		o = v1
		v1 += f
		f = (((o << 4) + k0) + (f << 4)) ^ ((o + 0x3c6ef372) + f) ^ ((v1 >> 5) + k1)
		o = v0
		v0 += f
		f = (((o << 4) + k2) + (f << 4)) ^ ((o + 0x3c6ef372) + f) ^ ((v0 >> 5) + k3)
		o = v1
		v1 += f
		f = (((o << 4) + k0) + (f << 4)) ^ ((o + 0xdaa66d2b) + f) ^ ((v1 >> 5) + k1)
		o = v0
		v0 += f
		f = (((o << 4) + k2) + (f << 4)) ^ ((o + 0xdaa66d2b) + f) ^ ((v0 >> 5) + k3)
		o = v1
		v1 += f
		f = (((o << 4) + k0) + (f << 4)) ^ ((o + 0x78dde6e4) + f) ^ ((v1 >> 5) + k1)
		o = v0
		v0 += f
		f = (((o << 4) + k2) + (f << 4)) ^ ((o + 0x78dde6e4) + f) ^ ((v0 >> 5) + k3)
		o = v1
		v1 += f
		f = (((o << 4) + k0) + (f << 4)) ^ ((o + 0x1715609d) + f) ^ ((v1 >> 5) + k1)
		o = v0
		v0 += f
		f = (((o << 4) + k2) + (f << 4)) ^ ((o + 0x1715609d) + f) ^ ((v0 >> 5) + k3)
		o = v1
		v1 += f
		f = (((o << 4) + k0) + (f << 4)) ^ ((o + 0xb54cda56) + f) ^ ((v1 >> 5) + k1)
		o = v0
		v0 += f
		f = (((o << 4) + k2) + (f << 4)) ^ ((o + 0xb54cda56) + f) ^ ((v0 >> 5) + k3)
		o = v1
		v1 += f
		f = (((o << 4) + k0) + (f << 4)) ^ ((o + 0x5384540f) + f) ^ ((v1 >> 5) + k1)
		o = v0
		v0 += f
		f = (((o << 4) + k2) + (f << 4)) ^ ((o + 0x5384540f) + f) ^ ((v0 >> 5) + k3)
		o = v1
		v1 += f
		f = (((o << 4) + k0) + (f << 4)) ^ ((o + 0xf1bbcdc8) + f) ^ ((v1 >> 5) + k1)
		o = v0
		v0 += f
		f = (((o << 4) + k2) + (f << 4)) ^ ((o + 0xf1bbcdc8) + f) ^ ((v0 >> 5) + k3)
		o = v1
		v1 += f
		f = (((o << 4) + k0) + (f << 4)) ^ ((o + 0x8ff34781) + f) ^ ((v1 >> 5) + k1)
		o = v0
		v0 += f
		f = (((o << 4) + k2) + (f << 4)) ^ ((o + 0x8ff34781) + f) ^ ((v0 >> 5) + k3)
		o = v1
		v1 += f
		f = (((o << 4) + k0) + (f << 4)) ^ ((o + 0x2e2ac13a) + f) ^ ((v1 >> 5) + k1)
		o = v0
		v0 += f
		f = (((o << 4) + k2) + (f << 4)) ^ ((o + 0x2e2ac13a) + f) ^ ((v0 >> 5) + k3)
		o = v1
		v1 += f
		f = (((o << 4) + k0) + (f << 4)) ^ ((o + 0xcc623af3) + f) ^ ((v1 >> 5) + k1)
		o = v0
		v0 += f
		f = (((o << 4) + k2) + (f << 4)) ^ ((o + 0xcc623af3) + f) ^ ((v0 >> 5) + k3)
		o = v1
		v1 += f
		f = (((o << 4) + k0) + (f << 4)) ^ ((o + 0x6a99b4ac) + f) ^ ((v1 >> 5) + k1)
		o = v0
		v0 += f
		f = (((o << 4) + k2) + (f << 4)) ^ ((o + 0x6a99b4ac) + f) ^ ((v0 >> 5) + k3)
		o = v1
		v1 += f
		f = (((o << 4) + k0) + (f << 4)) ^ ((o + 0x08d12e65) + f) ^ ((v1 >> 5) + k1)
		o = v0
		v0 += f
		f = (((o << 4) + k2) + (f << 4)) ^ ((o + 0x08d12e65) + f) ^ ((v0 >> 5) + k3)
		o = v1
		v1 += f
		f = (((o << 4) + k0) + (f << 4)) ^ ((o + 0xa708a81e) + f) ^ ((v1 >> 5) + k1)
		o = v0
		v0 += f
		f = (((o << 4) + k2) + (f << 4)) ^ ((o + 0xa708a81e) + f) ^ ((v0 >> 5) + k3)
		o = v1
		v1 += f
		f = (((o << 4) + k0) + (f << 4)) ^ ((o + 0x454021d7) + f) ^ ((v1 >> 5) + k1)
		o = v0
		v0 += f
		f = (((o << 4) + k2) + (f << 4)) ^ ((o + 0x454021d7) + f) ^ ((v0 >> 5) + k3)
		o = v1
		v1 += f
		f = (((o << 4) + k0) + (f << 4)) ^ ((o + 0xe3779b90) + f) ^ ((v1 >> 5) + k1)
		o = v0
		v0 += f
		f = (((o << 4) + k2) + (f << 4)) ^ ((o + 0xe3779b90) + f) ^ ((v0 >> 5) + k3)
		v1 += f
		c := (uint64(v0)<<32 | uint64(v1)) ^ xprev
		binary.BigEndian.PutUint64(buf, c)
		xprev, cprev = x, c
		buf = buf[8:]
	}
}

// decryptChainGeneric deciphers src into dst (len(dst) >= len(src), len(src) a
// multiple of 8): x_i = D(c_i ^ x_(i-1)); p_i = x_i ^ c_(i-1). dst and src may
// be the same slice: each block is read before it is written.
func decryptChainGeneric(k *[4]uint32, dst, src []byte) {
	k0, k1, k2, k3 := k[0], k[1], k[2], k[3]
	var cprev, xprev uint64
	for len(src) >= 8 && len(dst) >= 8 {
		c := binary.BigEndian.Uint64(src)
		x := c ^ xprev
		v0, v1 := uint32(x>>32), uint32(x)
		f := ((v0 << 4) + k2) ^ (v0 + 0xe3779b90) ^ ((v0 >> 5) + k3)
		o := v1
		v1 -= f
		f = (((o << 4) + k0) - (f << 4)) ^ ((o + 0xe3779b90) - f) ^ ((v1 >> 5) + k1)
		o = v0
		v0 -= f
		f = (((o << 4) + k2) - (f << 4)) ^ ((o + 0x454021d7) - f) ^ ((v0 >> 5) + k3)
		o = v1
		v1 -= f
		f = (((o << 4) + k0) - (f << 4)) ^ ((o + 0x454021d7) - f) ^ ((v1 >> 5) + k1)
		o = v0
		v0 -= f
		f = (((o << 4) + k2) - (f << 4)) ^ ((o + 0xa708a81e) - f) ^ ((v0 >> 5) + k3)
		o = v1
		v1 -= f
		f = (((o << 4) + k0) - (f << 4)) ^ ((o + 0xa708a81e) - f) ^ ((v1 >> 5) + k1)
		o = v0
		v0 -= f
		f = (((o << 4) + k2) - (f << 4)) ^ ((o + 0x08d12e65) - f) ^ ((v0 >> 5) + k3)
		o = v1
		v1 -= f
		f = (((o << 4) + k0) - (f << 4)) ^ ((o + 0x08d12e65) - f) ^ ((v1 >> 5) + k1)
		o = v0
		v0 -= f
		f = (((o << 4) + k2) - (f << 4)) ^ ((o + 0x6a99b4ac) - f) ^ ((v0 >> 5) + k3)
		o = v1
		v1 -= f
		f = (((o << 4) + k0) - (f << 4)) ^ ((o + 0x6a99b4ac) - f) ^ ((v1 >> 5) + k1)
		o = v0
		v0 -= f
		f = (((o << 4) + k2) - (f << 4)) ^ ((o + 0xcc623af3) - f) ^ ((v0 >> 5) + k3)
		o = v1
		v1 -= f
		f = (((o << 4) + k0) - (f << 4)) ^ ((o + 0xcc623af3) - f) ^ ((v1 >> 5) + k1)
		o = v0
		v0 -= f
		f = (((o << 4) + k2) - (f << 4)) ^ ((o + 0x2e2ac13a) - f) ^ ((v0 >> 5) + k3)
		o = v1
		v1 -= f
		f = (((o << 4) + k0) - (f << 4)) ^ ((o + 0x2e2ac13a) - f) ^ ((v1 >> 5) + k1)
		o = v0
		v0 -= f
		f = (((o << 4) + k2) - (f << 4)) ^ ((o + 0x8ff34781) - f) ^ ((v0 >> 5) + k3)
		o = v1
		v1 -= f
		f = (((o << 4) + k0) - (f << 4)) ^ ((o + 0x8ff34781) - f) ^ ((v1 >> 5) + k1)
		o = v0
		v0 -= f
		f = (((o << 4) + k2) - (f << 4)) ^ ((o + 0xf1bbcdc8) - f) ^ ((v0 >> 5) + k3)
		o = v1
		v1 -= f
		f = (((o << 4) + k0) - (f << 4)) ^ ((o + 0xf1bbcdc8) - f) ^ ((v1 >> 5) + k1)
		o = v0
		v0 -= f
		f = (((o << 4) + k2) - (f << 4)) ^ ((o + 0x5384540f) - f) ^ ((v0 >> 5) + k3)
		o = v1
		v1 -= f
		f = (((o << 4) + k0) - (f << 4)) ^ ((o + 0x5384540f) - f) ^ ((v1 >> 5) + k1)
		o = v0
		v0 -= f
		f = (((o << 4) + k2) - (f << 4)) ^ ((o + 0xb54cda56) - f) ^ ((v0 >> 5) + k3)
		o = v1
		v1 -= f
		f = (((o << 4) + k0) - (f << 4)) ^ ((o + 0xb54cda56) - f) ^ ((v1 >> 5) + k1)
		o = v0
		v0 -= f
		f = (((o << 4) + k2) - (f << 4)) ^ ((o + 0x1715609d) - f) ^ ((v0 >> 5) + k3)
		o = v1
		v1 -= f
		f = (((o << 4) + k0) - (f << 4)) ^ ((o + 0x1715609d) - f) ^ ((v1 >> 5) + k1)
		o = v0
		v0 -= f
		f = (((o << 4) + k2) - (f << 4)) ^ ((o + 0x78dde6e4) - f) ^ ((v0 >> 5) + k3)
		o = v1
		v1 -= f
		f = (((o << 4) + k0) - (f << 4)) ^ ((o + 0x78dde6e4) - f) ^ ((v1 >> 5) + k1)
		o = v0
		v0 -= f
		f = (((o << 4) + k2) - (f << 4)) ^ ((o + 0xdaa66d2b) - f) ^ ((v0 >> 5) + k3)
		o = v1
		v1 -= f
		f = (((o << 4) + k0) - (f << 4)) ^ ((o + 0xdaa66d2b) - f) ^ ((v1 >> 5) + k1)
		o = v0
		v0 -= f
		f = (((o << 4) + k2) - (f << 4)) ^ ((o + 0x3c6ef372) - f) ^ ((v0 >> 5) + k3)
		o = v1
		v1 -= f
		f = (((o << 4) + k0) - (f << 4)) ^ ((o + 0x3c6ef372) - f) ^ ((v1 >> 5) + k1)
		o = v0
		v0 -= f
		f = (((o << 4) + k2) - (f << 4)) ^ ((o + 0x9e3779b9) - f) ^ ((v0 >> 5) + k3)
		o = v1
		v1 -= f
		f = (((o << 4) + k0) - (f << 4)) ^ ((o + 0x9e3779b9) - f) ^ ((v1 >> 5) + k1)
		v0 -= f
		x = uint64(v0)<<32 | uint64(v1)
		binary.BigEndian.PutUint64(dst, x^cprev)
		xprev, cprev = x, c
		src, dst = src[8:], dst[8:]
	}
}

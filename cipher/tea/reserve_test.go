package tea

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
)

// forEachReserve runs f with Encrypt's reserve of first blocks off, and on
// with the 16-block kernel of each batch implementation this machine has.
func forEachReserve(t *testing.T, f func(t *testing.T)) {
	defer func(r bool, b int) { useReserve, batchImpl = r, b }(useReserve, batchImpl)
	useReserve = false
	t.Run("reserve=off", f)
	useReserve = true
	for _, impl := range batchImpls() {
		batchImpl = impl
		t.Run("reserve="+batchNames[impl], f)
	}
}

// paddedOf decrypts ct's blocks without unpadding.
func paddedOf(c *Cipher, ct []byte) []byte {
	p := make([]byte, len(ct))
	decryptChain(&c.k, p, ct)
	return p
}

// TestEncryptMatchesWithFill checks Encrypt byte for byte against
// EncryptWithFill given the filler Encrypt chose (read back from the
// decrypted blocks), with and without the reserve, for every length class.
func TestEncryptMatchesWithFill(t *testing.T) {
	forEachReserve(t, func(t *testing.T) {
		forEachChain(t, func(t *testing.T) {
			key := make([]byte, KeySize)
			rand.Read(key)
			c := mustCipher(t, key)
			for n := 0; n <= 100; n++ {
				pt := make([]byte, n)
				rand.Read(pt)
				for range 3 { // more than one entry of each reserve
					ct := c.Encrypt([]byte("h"), pt)
					p := paddedOf(c, ct[1:])
					fill := fillLen(n)
					if p[0] != 0xF8|byte(fill-3) {
						t.Fatalf("n=%d: header %#x", n, p[0])
					}
					var r [FillSize]byte
					copy(r[1:fill], p[1:fill])
					want, err := c.EncryptWithFill([]byte("h"), pt, bytes.NewReader(r[:]))
					if err != nil || !bytes.Equal(ct, want) {
						t.Fatalf("n=%d: Encrypt = %x, EncryptWithFill with its filler = %x", n, ct, want)
					}
					if got, err := c.DecryptStrict(nil, ct[1:]); err != nil || !bytes.Equal(got, pt) {
						t.Fatalf("n=%d: DecryptStrict = %x, %v", n, got, err)
					}
				}
			}
		})
	})
}

// TestReserveUsedOnce encrypts many messages of each length class served
// by the reserve (8k+7, 8k and 8k+1 bytes) and checks that no first block,
// in clear or enciphered, and no filler of the second block repeats.
func TestReserveUsedOnce(t *testing.T) {
	forEachReserve(t, func(t *testing.T) {
		c := mustCipher(t, []byte("0123456789ABCDEF"))
		for _, n := range []int{15, 16, 17, 0, 1, 7} {
			fill := fillLen(n)
			seen := map[[BlockSize]byte]bool{}
			seenFill := map[string]bool{}
			const count = 3000 // about 94 refills
			pt := make([]byte, n)
			for range count {
				ct := c.Encrypt(nil, pt)
				p := paddedOf(c, ct)
				if seen[[BlockSize]byte(ct)] || seen[[BlockSize]byte(p)] {
					t.Fatalf("n=%d: first block repeated", n)
				}
				seen[[BlockSize]byte(ct)], seen[[BlockSize]byte(p)] = true, true
				seenFill[string(p[1:fill])] = true
			}
			if len(seenFill) != count {
				t.Fatalf("n=%d: %d distinct fillers in %d messages", n, len(seenFill), count)
			}
		}
	})
}

// TestReserveConcurrent encrypts from many goroutines with one Cipher: every
// message decrypts, and no first block is handed out twice.
func TestReserveConcurrent(t *testing.T) {
	defer func(r bool) { useReserve = r }(useReserve)
	useReserve = true
	c := mustCipher(t, []byte("0123456789ABCDEF"))
	const workers, each = 8, 400
	firsts := make([][][BlockSize]byte, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				pt := fmt.Appendf(nil, "worker %d msg %4d", w, i)[:15+i%3] // 15, 16, 17 bytes
				ct := c.Encrypt(nil, pt)
				if got, err := c.DecryptStrict(nil, ct); err != nil || !bytes.Equal(got, pt) {
					t.Errorf("worker %d: round trip failed: %v", w, err)
					return
				}
				firsts[w] = append(firsts[w], [BlockSize]byte(ct))
			}
		})
	}
	wg.Wait()
	seen := map[[BlockSize]byte]bool{}
	for _, fs := range firsts {
		for _, f := range fs {
			if seen[f] {
				t.Fatal("a first block was used twice")
			}
			seen[f] = true
		}
	}
}

// TestBlocks compares each 16-block kernel with the generic code.
func TestBlocks(t *testing.T) {
	defer func(b int) { batchImpl = b }(batchImpl)
	for _, impl := range batchImpls() {
		t.Run(batchNames[impl], func(t *testing.T) {
			for range 50 {
				key := make([]byte, KeySize)
				rand.Read(key)
				c := mustCipher(t, key)
				var v [32]uint32
				var raw [128]byte
				rand.Read(raw[:])
				for i := range v {
					v[i] = binary.LittleEndian.Uint32(raw[4*i:])
				}
				got := v
				encryptBlocks(impl, &c.k, &got)
				for j := range 16 {
					var b [BlockSize]byte
					binary.BigEndian.PutUint32(b[:], v[j])
					binary.BigEndian.PutUint32(b[4:], v[16+j])
					encryptChainGeneric(&c.k, b[:])
					if binary.BigEndian.Uint32(b[:]) != got[j] || binary.BigEndian.Uint32(b[4:]) != got[16+j] {
						t.Fatalf("encrypt: block %d differs from the generic code", j)
					}
					d := decryptBlockGo(&c.k, binary.BigEndian.Uint64(b[:]))
					if d != uint64(v[j])<<32|uint64(v[16+j]) {
						t.Fatalf("generic decryption does not invert block %d", j)
					}
				}
				back := got
				decryptBlocks(impl, &c.k, &back)
				if back != v {
					t.Fatal("decrypt: the kernel does not invert encryption")
				}
				rand.Read(raw[:])
				for i := range v {
					v[i] = binary.LittleEndian.Uint32(raw[4*i:])
				}
				got = v
				decryptBlocks(impl, &c.k, &got)
				for j := range 16 {
					want := decryptBlockGo(&c.k, uint64(v[j])<<32|uint64(v[16+j]))
					if want != uint64(got[j])<<32|uint64(got[16+j]) {
						t.Fatalf("decrypt: block %d differs from the generic code", j)
					}
				}
			}
		})
	}
}

package main

import (
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"runtime"
	"time"

	zeebo "github.com/zeebo/blake3"
	luke "lukechampine.com/blake3"

	"github.com/tendril-p2p/tendril/cipher/aead"
	"github.com/tendril-p2p/tendril/hash/blake3"
	"github.com/tendril-p2p/tendril/secio"
)

// A cryptoCase is one row of the crypto table: bytes per second of one
// implementation, run on one goroutine.
type cryptoCase struct {
	Group string // rows of a group are compared with the group's first row
	Name  string
	Run   func(d time.Duration) (float64, error)
}

func hashCase(group, name string, size int, sum func([]byte) [32]byte) cryptoCase {
	return cryptoCase{group, name, func(d time.Duration) (float64, error) {
		buf := make([]byte, size)
		for i := range buf {
			buf[i] = byte(i)
		}
		return loopRate(d, size, func() error { runtime.KeepAlive(sum(buf)); return nil })
	}}
}

// loopRate runs fn, which processes size bytes, for about d and returns bytes
// per second.
func loopRate(d time.Duration, size int, fn func() error) (float64, error) {
	n := 0
	t0 := time.Now()
	for ; n%16 != 0 || time.Since(t0) < d; n++ {
		if err := fn(); err != nil {
			return 0, err
		}
	}
	return float64(n) * float64(size) / time.Since(t0).Seconds(), nil
}

func cryptoCases() []cryptoCase {
	lukeSum := func(p []byte) [32]byte { return luke.Sum256(p) }
	var cs []cryptoCase
	for _, size := range []struct {
		name string
		n    int
	}{{"1 KiB", 1 << 10}, {"64 KiB", 64 << 10}} {
		g := "BLAKE3 " + size.name
		cs = append(cs,
			hashCase(g, "tendril hash/blake3", size.n, blake3.Sum256),
			hashCase(g, "zeebo/blake3", size.n, zeebo.Sum256),
			hashCase(g, "lukechampine.com/blake3", size.n, lukeSum),
		)
	}
	for _, s := range []aead.Suite{aead.AES128GCM, aead.ChaCha20Poly1305} {
		g := "AEAD framing 64 KiB, " + s.String()
		cs = append(cs,
			cryptoCase{g, "secio.Conn write+read", func(d time.Duration) (float64, error) { return secioRate(s, d) }},
			cryptoCase{g, "raw Seal+Open", func(d time.Duration) (float64, error) { return sealRate(s, d) }},
		)
	}
	return cs
}

// sealRate seals and opens 64 KiB with counter nonces: the cryptographic
// floor of the framing.
func sealRate(s aead.Suite, d time.Duration) (float64, error) {
	key := make([]byte, s.KeySize())
	if _, err := rand.Read(key); err != nil {
		return 0, err
	}
	a, err := aead.New(s, key)
	if err != nil {
		return 0, err
	}
	msg := make([]byte, bulkWrite)
	nonce := make([]byte, a.NonceSize())
	ct := make([]byte, 0, bulkWrite+a.Overhead())
	pt := make([]byte, 0, bulkWrite)
	var ctr uint64
	return loopRate(d, bulkWrite, func() error {
		ctr++
		for i := range 8 {
			nonce[i] = byte(ctr >> (8 * i))
		}
		ct = a.Seal(ct[:0], nonce, msg, nil)
		var err error
		pt, err = a.Open(pt[:0], nonce, ct, nil)
		return err
	})
}

// secioRate writes 64 KiB writes through a secio.Conn over an in-memory
// pipe and reads them on the other end: framing, sealing, opening and
// copying, without TCP.
func secioRate(s aead.Suite, d time.Duration) (float64, error) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	cfg := func() (*secio.Config, error) {
		k, err := secio.GenerateKey()
		if err != nil {
			return nil, err
		}
		c := secio.DefaultConfig()
		c.PrivateKey = k
		c.Ciphers = []aead.Suite{s}
		return c, nil
	}
	ccfg, err := cfg()
	if err != nil {
		return 0, err
	}
	scfg, err := cfg()
	if err != nil {
		return 0, err
	}
	ctx := context.Background()
	type result struct {
		c   *secio.Conn
		err error
	}
	srvc := make(chan result, 1)
	go func() {
		c, err := secio.Server(ctx, b, scfg)
		srvc <- result{c, err}
	}()
	cli, err := secio.Client(ctx, a, ccfg)
	r := <-srvc
	if err != nil || r.err != nil {
		return 0, errors.Join(err, r.err)
	}
	srv := r.c
	done := make(chan error, 1)
	go func() {
		buf := make([]byte, bulkWrite)
		for {
			if _, err := srv.Read(buf); err != nil {
				if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || errors.Is(err, io.ErrClosedPipe) {
					err = nil
				}
				done <- err
				return
			}
		}
	}()
	msg := make([]byte, bulkWrite)
	rate, err := loopRate(d, bulkWrite, func() error {
		_, err := cli.Write(msg)
		return err
	})
	cli.Close()
	srv.Close()
	return rate, errors.Join(err, <-done)
}

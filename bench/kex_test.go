package main

import (
	"crypto/ecdh"
	"crypto/ed25519"
	"crypto/mlkem"
	"crypto/rand"
	"testing"

	"github.com/cloudflare/circl/dh/x25519"
	"github.com/cloudflare/circl/kem/mlkem/mlkem768"
)

// BenchmarkHandshakeCrypto times each public-key operation of one secio v3 handshake with
// the default hybrid (X25519MLKEM768, Ed25519 identities), in the standard library and in
// CIRCL, so that the CPU of a connection can be split by primitive. Per connection, both
// ends: 2 X25519 key generations and 2 X25519 ECDHs, one ML-KEM-768 key generation, one
// encapsulation-key parse and encapsulation and one decapsulation, 2 Ed25519 signatures
// and 2 verifications (docs/PERFORMANCE.md).
func BenchmarkHandshakeCrypto(b *testing.B) {
	var seed [64]byte
	rand.Read(seed[:])
	msg := make([]byte, 109) // a signed message: prefix, role, transcript hash, key
	b.Run("stdlib/X25519-keygen", func(b *testing.B) {
		for b.Loop() {
			ecdh.X25519().NewPrivateKey(seed[:32])
		}
	})
	b.Run("stdlib/X25519-ecdh", func(b *testing.B) {
		k, _ := ecdh.X25519().NewPrivateKey(seed[:32])
		p, _ := ecdh.X25519().NewPrivateKey(seed[32:])
		for b.Loop() {
			k.ECDH(p.PublicKey())
		}
	})
	b.Run("stdlib/MLKEM768-keygen", func(b *testing.B) {
		for b.Loop() {
			mlkem.NewDecapsulationKey768(seed[:])
		}
	})
	b.Run("stdlib/MLKEM768-encaps", func(b *testing.B) { // parse the key, then encapsulate
		dk, _ := mlkem.NewDecapsulationKey768(seed[:])
		ek := dk.EncapsulationKey().Bytes()
		for b.Loop() {
			k, _ := mlkem.NewEncapsulationKey768(ek)
			k.Encapsulate()
		}
	})
	b.Run("stdlib/MLKEM768-decaps", func(b *testing.B) {
		dk, _ := mlkem.NewDecapsulationKey768(seed[:])
		_, ct := dk.EncapsulationKey().Encapsulate()
		for b.Loop() {
			dk.Decapsulate(ct)
		}
	})
	b.Run("stdlib/Ed25519-sign", func(b *testing.B) {
		k := ed25519.NewKeyFromSeed(seed[:32])
		for b.Loop() {
			ed25519.Sign(k, msg)
		}
	})
	b.Run("stdlib/Ed25519-verify", func(b *testing.B) {
		k := ed25519.NewKeyFromSeed(seed[:32])
		sig := ed25519.Sign(k, msg)
		pub := k.Public().(ed25519.PublicKey)
		for b.Loop() {
			ed25519.Verify(pub, msg, sig)
		}
	})
	b.Run("circl/X25519-keygen", func(b *testing.B) {
		var pub, sec x25519.Key
		copy(sec[:], seed[:32])
		for b.Loop() {
			x25519.KeyGen(&pub, &sec)
		}
	})
	b.Run("circl/X25519-ecdh", func(b *testing.B) {
		var pub, sec, peer, ss x25519.Key
		copy(sec[:], seed[:32])
		copy(peer[:], seed[32:])
		x25519.KeyGen(&pub, &peer)
		for b.Loop() {
			x25519.Shared(&ss, &sec, &pub)
		}
	})
	b.Run("circl/MLKEM768-keygen", func(b *testing.B) {
		for b.Loop() {
			mlkem768.NewKeyFromSeed(seed[:])
		}
	})
	b.Run("circl/MLKEM768-encaps", func(b *testing.B) { // parse the key, then encapsulate
		pk, _ := mlkem768.NewKeyFromSeed(seed[:])
		ek := make([]byte, mlkem768.PublicKeySize)
		pk.Pack(ek)
		ct := make([]byte, mlkem768.CiphertextSize)
		ss := make([]byte, mlkem768.SharedKeySize)
		for b.Loop() {
			var k mlkem768.PublicKey
			k.Unpack(ek)
			k.EncapsulateTo(ct, ss, nil)
		}
	})
	b.Run("circl/MLKEM768-decaps", func(b *testing.B) {
		pk, sk := mlkem768.NewKeyFromSeed(seed[:])
		ct := make([]byte, mlkem768.CiphertextSize)
		ss := make([]byte, mlkem768.SharedKeySize)
		pk.EncapsulateTo(ct, ss, nil)
		for b.Loop() {
			sk.DecapsulateTo(ss, ct)
		}
	})
}

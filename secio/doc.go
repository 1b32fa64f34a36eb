// Package secio secures tendril connections: Ed25519 identities, BLAKE3
// peer IDs, a secio-style handshake, and an AEAD-framed net.Conn.
//
// # Identities
//
// A node's identity is an Ed25519 key ([PrivateKey], [PublicKey]). Its
// [PeerID] is the multihash (code 0x1e, BLAKE3-256, length 32) of the
// 32-byte public key, written in base58btc.
//
// # Handshake
//
// [Client] and [Server] run the same symmetric handshake (only the dialling
// differs): each side sends a Propose (nonce, identity key, key exchanges
// and ciphers in preference order, maximum frame size, version, and a key
// share: an ephemeral X25519 or P-256 key for its most preferred exchange),
// then, encrypted, a Confirm that echoes the peer's nonce and signs the
// transcript hash, which binds both Proposes as sent. That is two flights;
// when the two shares are not for the negotiated exchange (different
// preferences, or a peer sending none), an Exchange flight with the
// ephemeral keys comes in between and the transcript binds it too. The side whose
// BLAKE3(remote key || local nonce) is larger has its preference order
// honoured. Keys come from BLAKE3 in derive-key mode over the transcript
// hash and the ECDH secret, one per direction. The wire format is specified
// byte by byte in docs/secio.md.
//
// # Frames
//
// After the handshake every frame is a 4-byte big-endian length, then the
// AEAD ciphertext and tag; the length prefix is the additional data and the
// nonce is a 96-bit per-direction counter. One Write of at most the
// negotiated frame size is one frame and one write on the underlying
// connection.
//
// # Legacy TEA
//
// [LegacyTEA] frames a connection with the QQ TEA cipher for peers that
// cannot do better. It has no handshake and no integrity: it is not secure,
// and Client and Server never negotiate it.
package secio

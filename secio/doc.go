// Package secio secures tendril connections: Ed25519 identities, BLAKE3
// peer IDs, a post-quantum handshake that hides both identities, and an
// AEAD record layer as a net.Conn.
//
// # Identities
//
// A node's identity is an Ed25519 key ([PrivateKey], [PublicKey]). Its
// [PeerID] is the multihash (code 0x1e, BLAKE3-256, length 32) of the
// 32-byte public key, written in base58btc.
//
// # Handshake
//
// [Client] (the dialer) and [Server] (the listener) run a three-flight
// handshake shaped as Noise XX and TLS 1.3. The dialer sends a ClientHello
// with a key share for its first key exchange: by default the
// post-quantum hybrid [P256MLKEM768] (a P-256 key and an ML-KEM-768
// encapsulation key). The listener answers with a ServerHello (its share: its
// P-256 key and an ML-KEM ciphertext) and, encrypted under keys from the
// combined secret and the transcript, its identity and a signature over the
// transcript and its role. The dialer checks that identity
// (Config.ExpectedPeer included) before it sends, encrypted, its own, and
// returns at once, so that its first data follows in the same round trip.
// No identity key or peer ID is ever sent in clear. A listener that wants
// another key exchange asks for it once (a HelloRetryRequest). Keys come
// from BLAKE3 in derive-key mode, one per direction and purpose. The wire
// format is specified byte by byte in docs/secio.md.
//
// # Records
//
// Every encrypted frame is a 4-byte big-endian length, then the AEAD
// ciphertext of its content followed by a record type (data, key update,
// close), and the tag; the length prefix is the additional data. Each
// direction has a secret from which its record key and a secret 12-byte IV
// are derived; a record's nonce is the IV XOR its sequence number under
// that key (RFC 8446 section 5.3). One Write of at most the negotiated frame
// size is one record and one write on the underlying connection. Each
// direction moves to its next secret, key and IV after 2^32 AES blocks,
// announced by a key update record; a key update before the 65th record of
// its key ([ErrKeyUpdateTooSoon]) and more than 16 records in a row without
// data ([ErrTooManyNonDataRecords]) end the connection. Close sends a close
// record; a connection that ends without one reads as [ErrTruncated]. Over
// TCP the dialer then sends its FIN, and the listener resets the connection
// once that FIN has come, so that no TIME_WAIT is left on either end.
//
// # Memory
//
// An idle Conn holds no buffer. A record's buffer never commits more than
// 64 KiB beyond what has arrived of it, and every read buffer can be charged
// to a [MemoryBudget] (Config.Memory). A longer record is received in 64 KiB
// chunks and copied once into its buffer, unless it has already arrived in
// the socket: where the Conn can ask the socket (TCP and Unix sockets on
// Linux, macOS and the BSDs), it then takes its buffer at once and reads
// straight into it. The socket is the net.Conn's own if it has a
// SyscallConn method: a wrapper that returns the socket's bytes unchanged
// should forward SyscallConn to keep this, and no other wrapper should.
//
// A Read whose buffer holds a record's data decrypts it straight into the
// buffer; a shorter one decrypts the record in the Conn's buffer and copies
// it out. A reader that parses framing of its own (the mux) learns from
// [Conn.NextRecord] how large the next record is, so that every Read takes a
// whole record without a copy.
//
// # Legacy TEA
//
// [LegacyTEA] frames a connection with the QQ TEA cipher for peers that
// cannot do better. It has no handshake and no integrity: it is not secure,
// and Client and Server never negotiate it.
package secio

package secio_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"

	"github.com/tendril-p2p/tendril/secio"
)

// Two nodes secure a connection (here a net.Pipe) and exchange a message.
// The dialler pins the listener's peer ID, which it checks as soon as it has
// decrypted the listener's identity, before it reveals its own.
func ExampleClient() {
	serverKey, _ := secio.GenerateKey()
	clientKey, _ := secio.GenerateKey()
	c, s := net.Pipe()

	done := make(chan struct{})
	go func() {
		defer close(done)
		conn, err := secio.Server(context.Background(), s, &secio.Config{PrivateKey: serverKey})
		if err != nil {
			log.Print(err)
			return
		}
		defer conn.Close()
		fmt.Println("server sees client:", conn.RemotePeer() == clientKey.PeerID())
		io.Copy(conn, conn) // echo
	}()

	conn, err := secio.Client(context.Background(), c, &secio.Config{
		PrivateKey:   clientKey,
		ExpectedPeer: serverKey.PeerID(),
	})
	if err != nil {
		log.Fatal(err)
	}
	conn.Write([]byte("hello"))
	buf := make([]byte, 5)
	io.ReadFull(conn, buf)
	conn.Close()
	<-done
	fmt.Println("client got:", string(buf), "secure:", conn.Secure())
	// Output:
	// server sees client: true
	// client got: hello secure: true
}

// A peer ID is the BLAKE3 multihash of the Ed25519 public key, in
// base58btc.
func ExampleParsePeerID() {
	seed := make([]byte, secio.PrivateKeySize) // all zero: for the example only
	key, _ := secio.UnmarshalPrivateKey(seed)
	id := key.PeerID()
	fmt.Println(id)
	parsed, err := secio.ParsePeerID(id.String())
	fmt.Println(parsed == id, err, parsed.Matches(key.Public()))
	// Output:
	// gW3BXdPdNE8Rq2guvJUdVMvh2qLZar8UWrUrEgm78CmwdP
	// true <nil> true
}

// Legacy TEA framing for a peer that speaks nothing else. It has no
// integrity and no authentication.
func ExampleLegacyTEA() {
	key := []byte("0123456789abcdef")
	a, b := net.Pipe()
	la, _ := secio.LegacyTEA(a, key, nil)
	lb, _ := secio.LegacyTEA(b, key, nil)
	go la.Write([]byte("hi"))
	buf := make([]byte, 2)
	io.ReadFull(lb, buf)
	fmt.Println(string(buf), lb.Secure(), lb.RemotePeer().IsZero())
	la.Close()
	lb.Close()
	// Output: hi false true
}

//go:build unix

package tendril

import (
	"bytes"
	"io"
	"testing"
	"time"

	"github.com/tendril-p2p/tendril/internal/testutil"
	"github.com/tendril-p2p/tendril/secio"
)

// TestFirstMessageIn: the accept loop's look at a new connection sees a first message only
// once all of it has arrived, and takes nothing from the socket.
func TestFirstMessageIn(t *testing.T) {
	a, b := testutil.TCPPair(t)
	defer a.Close()
	defer b.Close()
	buf := make([]byte, 4+secio.MaxHandshakeMessage)
	if firstMessageIn(b, buf) {
		t.Fatal("a message before anything was sent")
	}
	msg := append([]byte{0, 0, 1, 0}, bytes.Repeat([]byte{7}, 256)...)
	if _, err := a.Write(msg[:len(msg)-1]); err != nil {
		t.Fatal(err)
	}
	// Loopback delivers a write before it returns; give it a moment anyway.
	time.Sleep(20 * time.Millisecond)
	if firstMessageIn(b, buf) {
		t.Fatal("a message one byte short")
	}
	if _, err := a.Write(msg[len(msg)-1:]); err != nil {
		t.Fatal(err)
	}
	if !eventually(5*time.Second, time.Millisecond, nil, func() bool { return firstMessageIn(b, buf) }) {
		t.Fatal("the whole message not seen")
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(b, got); err != nil || !bytes.Equal(got, msg) {
		t.Fatalf("after the look the socket holds %x (%v), want the message", got, err)
	}
	// A length beyond what the look can hold is not a message it has seen.
	if _, err := a.Write([]byte{0, 1, 0, 0, 1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	if firstMessageIn(b, buf) {
		t.Fatal("a 64 KiB message seen in 3 bytes")
	}
}

package secio

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/tendril-p2p/tendril/internal/testutil"
)

// TestNotTendrilPeer: when something other than a tendril peer answers (an HTTP server)
// or dials (a TLS client, random bytes), the handshake says so in a *NotTendrilError that
// still matches ErrInvalidMessage, rather than reporting a length prefix of 1213486160.
func TestNotTendrilPeer(t *testing.T) {
	for _, tc := range []struct {
		name   string
		dialer bool // the stranger dials; else it answers our dial
		sent   string
		want   string
	}{
		{"HTTP server", false, "HTTP/1.1 400 Bad Request\r\n\r\n", `it sent "HTTP", which looks like an HTTP server's response`},
		{"HTTP client", true, "GET / HTTP/1.1\r\n\r\n", "looks like an HTTP request"},
		{"TLS client", true, "\x16\x03\x01\x02\x00\x01\x00\x01", "looks like TLS"},
		{"zeros", false, "\x00\x00\x00\x00\x00", "unexpected bytes 00 00 00 00 (as a length prefix 0, want 1 to"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ours, theirs := testutil.TCPPair(t)
			defer ours.Close()
			go func() {
				defer theirs.Close()
				theirs.Write([]byte(tc.sent))
				buf := make([]byte, 4096)
				for {
					if _, err := theirs.Read(buf); err != nil {
						return
					}
				}
			}()
			var err error
			if tc.dialer {
				_, err = Server(context.Background(), ours, testConfig("listener"))
			} else {
				_, err = Client(context.Background(), ours, testConfig("dialer"))
			}
			var nt *NotTendrilError
			if !errors.As(err, &nt) || !errors.Is(err, ErrNotTendril) || !errors.Is(err, ErrInvalidMessage) {
				t.Fatalf("handshake with %s: %v, want a *NotTendrilError matching ErrNotTendril and ErrInvalidMessage", tc.name, err)
			}
			if msg := err.Error(); !strings.Contains(msg, "not a tendril peer: ") || !strings.Contains(msg, tc.want) {
				t.Errorf("message %q, want it to contain %q", msg, tc.want)
			}
		})
	}
}

//go:build !unix

package tendril

import "net"

// firstMessageIn cannot look at a socket's received bytes here, so it never reports a
// first message as arrived: every accepted connection starts silent, and one whose
// dialer has spoken may be evicted by a burst of newcomers accepted before its handshake
// reads (see admit.Ledger.AdmitInbound).
func firstMessageIn(net.Conn, []byte) bool { return false }

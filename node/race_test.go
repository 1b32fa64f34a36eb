//go:build race

package node

// raceEnabled: under the race detector every handshake and goroutine runs about ten times
// slower, so the swarm test's time bounds measure the detector, not the protocols; it
// then allows four times as long again.
const raceEnabled = true

//go:build race

package tendril

// raceEnabled scales the heaviest tests down under the race detector, which makes every
// connection's handshake and goroutines about ten times slower.
const raceEnabled = true

//go:build race

package secio

// raceEnabled: sync.Pool drops items at random under the race detector.
const raceEnabled = true

//go:build !race

package secio

const raceEnabled = false

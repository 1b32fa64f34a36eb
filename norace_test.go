//go:build !race

package tendril

const raceEnabled = false

//go:build !race

package tea

const raceEnabled = false

//go:build !race

package cache

// raceEnabled: see race_on_test.go.
const raceEnabled = false

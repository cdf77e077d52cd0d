//go:build !race

package warm_test

const raceEnabled = false

//go:build race

package warm_test

// raceEnabled: the race detector slows the randomized schedule about
// tenfold, so its -race pass runs a tenth of the runs; the plain pass
// of the same CI runs them all.
const raceEnabled = true

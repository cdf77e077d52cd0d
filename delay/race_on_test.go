//go:build race

package delay

// raceEnabled: the race detector slows every handler and take several
// times on the same cores as Redis, so ratio-of-latency bounds that hold
// in the plain run are judged against an absolute bound that still
// catches a line being held back.
const raceEnabled = true

//go:build race

package cache

// raceEnabled: the race detector slows every read several times, so
// latency bounds are logged, not asserted.
const raceEnabled = true

//go:build race

package cache

// raceEnabled: under the race detector sync.Pool drops a quarter of what
// is put back, so a pooled cart scratch is now and then built anew.
const raceEnabled = true

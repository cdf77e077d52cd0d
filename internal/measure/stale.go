package measure

import "time"

// Read is one read of a versioned value: when it began and the version
// it was served.
type Read struct {
	Began   time.Time
	Version string
}

// Write is one write of a versioned value: when it was sent and returned,
// and the version it wrote.
type Write struct {
	Sent, Returned time.Time
	Version        string
}

// StaleWindows returns, for each write and each reader's log (its reads in
// order), how long after the write returned the reader's last read that
// was served another version began: 0 when none was. Only reads begun
// before the next write was sent count; one begun while it was under way
// may rightly be served its version.
func StaleWindows(writes []Write, logs [][]Read) []time.Duration {
	out := make([]time.Duration, 0, len(writes)*len(logs))
	for _, log := range logs {
		k := 0
		for i, w := range writes {
			var end time.Time // the next write's sending; zero for the last
			if i+1 < len(writes) {
				end = writes[i+1].Sent
			}
			for k < len(log) && log[k].Began.Before(w.Returned) {
				k++
			}
			worst := time.Duration(0)
			for j := k; j < len(log) && (end.IsZero() || log[j].Began.Before(end)); j++ {
				if log[j].Version != w.Version {
					worst = log[j].Began.Sub(w.Returned)
				}
			}
			out = append(out, worst)
		}
	}
	return out
}

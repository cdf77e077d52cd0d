package measure

import (
	"crypto/rand"
	"encoding/hex"
)

// RunID is a short random hex name for one benchmark run's keys and
// schemas, so runs sharing a server never touch each other's data.
func RunID() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

package delay

import (
	"flag"
	"os"
	"testing"
)

// TestMain runs up to 6 parallel tests at once unless -parallel says
// otherwise: most of this package's time is waiting on leases, timers and
// private servers, not CPU, and the default (GOMAXPROCS, 2 on the CI
// machine) would leave the suite waiting in line.
func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", "6")
	}
	os.Exit(m.Run())
}

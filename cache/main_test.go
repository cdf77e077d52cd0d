package cache

import (
	"flag"
	"os"
	"testing"
)

// TestMain runs up to 6 parallel tests at once unless -parallel says
// otherwise: most of this package's parallel tests wait on private
// servers, fault proxies, invalidations and grace periods rather than
// use CPU, and the default (GOMAXPROCS, 2 on the CI machine) would leave
// them waiting in line.
func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", "6")
	}
	os.Exit(m.Run())
}

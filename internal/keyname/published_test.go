package keyname_test

import (
	"testing"

	"github.com/tierset/tierset/cache"
	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/internal/keyname"
)

// TestPublishedValues: the packages spell out the default prefix and the
// name limit in their own constants, so a reader sees the value; they must
// stay the values keyname checks with.
func TestPublishedValues(t *testing.T) {
	t.Parallel()
	rows := []struct {
		name      string
		got, want any
	}{
		{"cache.DefaultPrefix", cache.DefaultPrefix, keyname.DefaultPrefix},
		{"delay.DefaultPrefix", delay.DefaultPrefix, keyname.DefaultPrefix},
	}
	for _, r := range rows {
		if r.got != r.want {
			t.Errorf("%s = %v, keyname has %v", r.name, r.got, r.want)
		}
	}
}

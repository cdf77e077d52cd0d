package console

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestClientAddr: the address login attempts are counted by. Behind a
// declared proxy it is the last X-Forwarded-For entry, which some proxies
// write with a port (an entry the limit cannot read would count every
// client as the proxy, one bucket for all); an IPv6 address counts by its
// /64 whatever its zone; an undeclared proxy's header is ignored.
func TestClientAddr(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		trust  bool
		remote string
		xff    []string
		want   string
	}{
		{"ipv4 peer", false, "192.0.2.7:4000", nil, "192.0.2.7"},
		{"ipv6 peer by /64", false, "[2001:db8:0:1::9]:4000", nil, "2001:db8:0:1::/64"},
		{"ipv6 peer with a zone", false, "[2001:db8:0:1::9%eth0]:4000", nil, "2001:db8:0:1::/64"},
		{"ipv4-mapped peer", false, "[::ffff:192.0.2.7]:4000", nil, "192.0.2.7"},
		{"undeclared proxy", false, "10.0.0.1:4000", []string{"203.0.113.7"}, "10.0.0.1"},
		{"proxy", true, "10.0.0.1:4000", []string{"198.51.100.1, 203.0.113.7"}, "203.0.113.7"},
		{"proxy, entry with a port", true, "10.0.0.1:4000", []string{"198.51.100.1, 203.0.113.7:51234"}, "203.0.113.7"},
		{"proxy, bracketed ipv6 with a port", true, "10.0.0.1:4000", []string{"[2001:db8:0:2::5]:443"}, "2001:db8:0:2::/64"},
		{"proxy, bracketed ipv6", true, "10.0.0.1:4000", []string{"[2001:db8:0:2::5]"}, "2001:db8:0:2::/64"},
		{"proxy, ipv6", true, "10.0.0.1:4000", []string{"2001:db8:0:2::5"}, "2001:db8:0:2::/64"},
		{"proxy, last of two header lines", true, "10.0.0.1:4000", []string{"198.51.100.1", "203.0.113.7"}, "203.0.113.7"},
		{"proxy, unreadable entry", true, "10.0.0.1:4000", []string{"unknown"}, "10.0.0.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &Console{cfg: config{trustProxy: tc.trust}}
			r := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/login", nil)
			r.RemoteAddr = tc.remote
			for _, v := range tc.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			if got := s.clientAddr(r); got != tc.want {
				t.Errorf("clientAddr = %q, want %q", got, tc.want)
			}
		})
	}
}

package console

import (
	"math"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// loginLimiter bounds login attempts: a token bucket per client address
// and one for every client together, each refilled at its limit per
// minute. An attempt takes a token from both before the token is
// compared, and a successful login gives them back, so the limits count
// wrong guesses (and attempts in progress), never an operator's logins.
// An attempt is refused before it takes anything, so a client over its
// own limit does not drain the global one. It lives in the console's
// memory: each console process has its own.
type loginLimiter struct {
	perAddr, global float64 // tokens a minute, and each bucket's size

	mu    sync.Mutex
	addrs map[string]*bucket
	all   bucket
}

type bucket struct {
	tokens float64
	at     time.Time
}

// limitEntries is the number of addresses kept before full buckets (which
// hold nothing an empty entry would not) are dropped.
const limitEntries = 1024

func newLoginLimiter(perAddr, global int) *loginLimiter {
	return &loginLimiter{perAddr: float64(perAddr), global: float64(global), addrs: map[string]*bucket{},
		all: bucket{tokens: float64(global)}}
}

// fill brings b up to now at rate a minute (size rate); a new bucket is full.
func (b *bucket) fill(rate float64, now time.Time) {
	if b.at.IsZero() {
		b.tokens = rate
	} else if d := now.Sub(b.at); d > 0 {
		b.tokens = math.Min(rate, b.tokens+d.Minutes()*rate)
	}
	b.at = now
}

// wait is how long until b holds a whole token.
func (b *bucket) wait(rate float64) time.Duration {
	if b.tokens >= 1 {
		return 0
	}
	return time.Duration((1 - b.tokens) / rate * float64(time.Minute))
}

// take takes an attempt for addr at now, or returns how long to wait.
func (l *loginLimiter) take(addr string, now time.Time) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	a := l.addrs[addr]
	if a == nil {
		a = &bucket{}
	}
	a.fill(l.perAddr, now)
	l.all.fill(l.global, now)
	if w := max(a.wait(l.perAddr), l.all.wait(l.global)); w > 0 {
		return w, false
	}
	if len(l.addrs) >= limitEntries {
		for k, b := range l.addrs {
			if b.fill(l.perAddr, now); b.tokens >= l.perAddr {
				delete(l.addrs, k)
			}
		}
	}
	a.tokens--
	l.all.tokens--
	l.addrs[addr] = a
	return 0, true
}

// refund gives back a successful login's attempt.
func (l *loginLimiter) refund(addr string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if a := l.addrs[addr]; a != nil {
		a.tokens = math.Min(l.perAddr, a.tokens+1)
	}
	l.all.tokens = math.Min(l.global, l.all.tokens+1)
}

// clientAddr is the address logins are counted by: the peer's, or with
// TrustProxy the last X-Forwarded-For entry (the one the operator's proxy
// appended; any before it the client could have written), with or
// without a port ("203.0.113.7:51234", "[2001:db8::1]:443", as some
// proxies write it). An IPv6 address counts by its /64, which one client
// usually holds whole, its zone dropped.
func (s *Console) clientAddr(r *http.Request) string {
	addr := r.RemoteAddr
	if ip, ok := parseAddr(addr); ok {
		addr = ip.String()
	}
	if s.cfg.trustProxy {
		if xs := r.Header.Values("X-Forwarded-For"); len(xs) > 0 {
			parts := strings.Split(xs[len(xs)-1], ",")
			if ip, ok := parseAddr(strings.TrimSpace(parts[len(parts)-1])); ok {
				addr = ip.String()
			}
		}
	}
	if ip, ok := parseAddr(addr); ok && ip.Is6() {
		return netip.PrefixFrom(ip, 64).Masked().String()
	}
	return addr
}

// parseAddr reads an IP address, with or without a port and brackets,
// as a plain address: IPv4-mapped IPv6 as IPv4, no zone.
func parseAddr(s string) (netip.Addr, bool) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap().WithZone(""), true
	}
	if ip, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")); err == nil {
		return ip.Unmap().WithZone(""), true
	}
	return netip.Addr{}, false
}

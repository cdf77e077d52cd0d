package faultproxy

import "sync"

// Hold is one reply the proxy keeps from its client until Release: the
// server has answered, the client waits. Everything the server sends
// after it on the same connection waits behind it, as on a slow link
// (TCP keeps order).
//
// A test uses it to order events that are otherwise a race: hold the
// reply of a read the server ran before a write, let the write and later
// reads happen, then release the old reply.
type Hold struct {
	match   Match
	reply   bool          // match applies to what the server sends, not to the request
	held    chan struct{} // closed when a reply is being held
	release chan struct{} // closed by Release
	hOnce   sync.Once
	rOnce   sync.Once
}

// HoldNext holds the reply to the next request matching m (Any when nil).
// The request reaches the server at once; the first bytes the server
// sends back on that connection, and all after them, wait for Release.
// It suits clients that wait for a reply before sending the next request
// on a connection (go-redis does, pipelines included).
func (p *Proxy) HoldNext(m Match) *Hold {
	return p.addHold(m, false)
}

// HoldNextReply holds the next chunk the server sends, on any connection,
// whose bytes match m: a reply, or a message the server pushes unasked
// such as a pub/sub message or a client-tracking invalidation. It and
// everything after it on that connection wait for Release.
func (p *Proxy) HoldNextReply(m Match) *Hold {
	return p.addHold(m, true)
}

func (p *Proxy) addHold(m Match, reply bool) *Hold {
	if m == nil {
		m = Any
	}
	h := &Hold{match: m, reply: reply, held: make(chan struct{}), release: make(chan struct{})}
	p.mu.Lock()
	p.holds = append(p.holds, h)
	p.mu.Unlock()
	return h
}

// Held is closed once the server's reply has reached the proxy and is
// being held: from then on the server has run the request.
func (h *Hold) Held() <-chan struct{} { return h.held }

// Release lets the held reply, and whatever queued behind it, go on to
// the client. It may be called before the reply arrives (then nothing is
// held) and more than once.
func (h *Hold) Release() { h.rOnce.Do(func() { close(h.release) }) }

// takeHold removes and returns the first pending hold of the given kind
// that matches b, or nil. Caller holds p.mu.
func (p *Proxy) takeHold(b []byte, reply bool) *Hold {
	for i, h := range p.holds {
		if h.reply == reply && h.match(b) {
			p.holds = append(p.holds[:i], p.holds[i+1:]...)
			return h
		}
	}
	return nil
}

// wait blocks the reply direction of pr at h until h is released (true),
// or the pair or the proxy is closed (false: the reply is never sent).
func (p *Proxy) wait(pr *pair, h *Hold) bool {
	h.hOnce.Do(func() { close(h.held) })
	select {
	case <-h.release:
		return true
	case <-pr.closed:
	case <-p.done:
	}
	return false
}

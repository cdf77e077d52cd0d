// Package faultproxy is a small TCP proxy for fault tests: it sits between
// a client and a real Redis and can drop exactly one reply (the server has
// run the command; the client sees its connection fail), add latency, or
// cut every open connection.
//
// Why not toxiproxy: its toxics act on byte streams by time or size, and
// cutting "the reply to this one EVALSHA, after the server ran it" needs a
// look at the request bytes. That is twenty lines here and keeps the core
// module's dependency list as it is.
package faultproxy

import (
	"bytes"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// ErrClosed is returned by Start's accept loop once Close has run.
var ErrClosed = errors.New("faultproxy: closed")

// Match reports whether a chunk of request bytes should have its reply cut.
type Match func(req []byte) bool

// Any matches every request.
func Any(req []byte) bool { return true }

// Contains matches a request whose bytes contain s, ignoring ASCII case
// (go-redis sends command names in lower case: "evalsha").
func Contains(s string) Match {
	b := bytes.ToLower([]byte(s))
	return func(req []byte) bool { return bytes.Contains(bytes.ToLower(req), b) }
}

// Proxy forwards 127.0.0.1:<port> to one upstream address.
type Proxy struct {
	upstream string
	ln       net.Listener

	mu      sync.Mutex
	conns   map[*pair]struct{}
	armed   int   // replies still to cut
	match   Match // which requests arm a cut
	latency time.Duration
	closed  bool
	// hold: replies of the next held requests matching holdMatch wait
	// until release is closed (Release, Close).
	held      int
	holdMatch Match
	release   chan struct{}
	quit      chan struct{}
	holding   atomic.Int64

	cuts atomic.Int64
	wg   sync.WaitGroup
}

type pair struct {
	client, server net.Conn
	cut            atomic.Bool   // the next reply on this connection is dropped
	hold           chan struct{} // non-nil: the next reply waits until it is closed
	done           chan struct{} // closed with the pair: a held reply is dropped
	once           sync.Once
}

func (p *pair) close() {
	p.once.Do(func() {
		close(p.done)
		_ = p.client.Close()
		_ = p.server.Close()
	})
}

// Start listens on a free loopback port and forwards to upstream.
func Start(upstream string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{upstream: upstream, ln: ln, conns: map[*pair]struct{}{}, quit: make(chan struct{})}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the address clients dial.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// CutNext arms the proxy to drop the reply of the next n requests that
// match m (Any when nil): each such request reaches the server, its reply
// is discarded and its connection closed.
func (p *Proxy) CutNext(n int, m Match) {
	if m == nil {
		m = Any
	}
	p.mu.Lock()
	p.armed, p.match = n, m
	p.mu.Unlock()
}

// Armed is how many cuts are still waiting for a matching request.
func (p *Proxy) Armed() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.armed
}

// Cuts is how many replies have been dropped so far.
func (p *Proxy) Cuts() int64 { return p.cuts.Load() }

// SetLatency delays every reply chunk by d (0 turns it off).
func (p *Proxy) SetLatency(d time.Duration) {
	p.mu.Lock()
	p.latency = d
	p.mu.Unlock()
}

// HoldNext arms the proxy to hold back the reply of the next n requests
// that match m (Any when nil): each reaches the server, which runs it, and
// its reply waits in the proxy until Release or Close, or is dropped when
// its client closes the connection. A client whose deadline passes
// meanwhile sees a timeout for a command that ran.
func (p *Proxy) HoldNext(n int, m Match) {
	if m == nil {
		m = Any
	}
	p.mu.Lock()
	p.held, p.holdMatch = n, m
	if p.release == nil {
		p.release = make(chan struct{})
	}
	p.mu.Unlock()
}

// Holding is how many replies the proxy holds back now.
func (p *Proxy) Holding() int { return int(p.holding.Load()) }

// Release lets every held reply go on to its client.
func (p *Proxy) Release() {
	p.mu.Lock()
	if p.release != nil {
		close(p.release)
		p.release = nil
	}
	p.mu.Unlock()
}

// CutAll closes every open connection, as a network blip would.
func (p *Proxy) CutAll() {
	p.mu.Lock()
	all := make([]*pair, 0, len(p.conns))
	for c := range p.conns {
		all = append(all, c)
	}
	p.mu.Unlock()
	for _, c := range all {
		c.close()
	}
}

// Close stops listening and closes every connection.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if !p.closed {
		close(p.quit)
	}
	p.closed = true
	p.mu.Unlock()
	err := p.ln.Close()
	p.CutAll()
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.DialTimeout("tcp", p.upstream, 5*time.Second)
		if err != nil {
			_ = c.Close()
			continue
		}
		pr := &pair{client: c, server: s, done: make(chan struct{})}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			pr.close()
			return
		}
		p.conns[pr] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go p.up(pr)
		go p.down(pr)
	}
}

// up copies client -> server, arming a cut on the pair when a request matches.
func (p *Proxy) up(pr *pair) {
	defer p.wg.Done()
	defer p.drop(pr)
	buf := make([]byte, 64<<10)
	for {
		n, err := pr.client.Read(buf)
		if n > 0 {
			p.mu.Lock()
			if p.armed > 0 && p.match(buf[:n]) {
				p.armed--
				pr.cut.Store(true)
			}
			if p.held > 0 && p.holdMatch(buf[:n]) {
				p.held--
				pr.hold = p.release
			}
			p.mu.Unlock()
			if _, werr := pr.server.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// down copies server -> client, dropping the reply of an armed pair.
func (p *Proxy) down(pr *pair) {
	defer p.wg.Done()
	defer p.drop(pr)
	buf := make([]byte, 64<<10)
	for {
		n, err := pr.server.Read(buf)
		if n > 0 {
			if pr.cut.Load() {
				p.cuts.Add(1)
				return // the server ran it; the client never hears
			}
			p.mu.Lock()
			d, hold := p.latency, pr.hold
			pr.hold = nil
			p.mu.Unlock()
			if hold != nil {
				p.holding.Add(1)
				select {
				case <-hold:
				case <-p.quit:
				case <-pr.done: // the client gave up on the connection
				}
				p.holding.Add(-1)
			}
			if d > 0 {
				time.Sleep(d)
			}
			if _, werr := pr.client.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				return
			}
			return
		}
	}
}

func (p *Proxy) drop(pr *pair) {
	pr.close()
	p.mu.Lock()
	delete(p.conns, pr)
	p.mu.Unlock()
}

// Package faultproxy is a TCP proxy on 127.0.0.1 that makes a dependency
// slow or unreachable on purpose: a fixed delay plus jitter on each
// direction, a refusal of every connection, or a partition that holds every
// byte. Its upstream can move (Retarget): the address a Redis master is
// known by, moved to the promoted replica. The fault suite puts it in front
// of the broker, the database, the risk service and a Redis master; bench/
// uses it to measure the system under a slow dependency. It imports no
// project package.
package faultproxy

import (
	"errors"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Direction names one way bytes flow through the proxy.
type Direction int

const (
	// ToServer is the client's requests on their way to the upstream.
	ToServer Direction = iota
	// ToClient is the upstream's answers (acks, rows, verdicts) on their
	// way back: the latency a client observes for a request/response
	// protocol.
	ToClient
)

// Latency is the delay added to every chunk of bytes in one direction: Delay
// plus a uniform random amount in [-Jitter, +Jitter], never below zero.
// Bytes on one connection stay in order, so a chunk never leaves before the
// one read ahead of it: jitter spreads the delays between connections and
// between bursts, it does not reorder a stream. The delay is a latency, not
// a bandwidth cap: chunks read while earlier ones wait are held in
// parallel.
type Latency struct {
	Delay, Jitter time.Duration
}

func (l Latency) draw() time.Duration {
	d := l.Delay
	if l.Jitter > 0 {
		d += time.Duration(rand.Int64N(int64(2*l.Jitter)+1)) - l.Jitter
	}
	return max(d, 0)
}

// Proxy forwards every connection accepted on its address to the upstream.
// Its faults may be changed at any time; a change applies to chunks read
// after it, on open and new connections alike. Safe for concurrent use.
type Proxy struct {
	ln net.Listener

	lat     [2]atomic.Pointer[Latency]
	refused atomic.Bool

	stop chan struct{} // closed by Close: delayed chunks are dropped

	mu       sync.Mutex
	upstream string
	// gen counts the moves and cuts (Retarget, Refuse): a connection
	// dialled before one is not kept after it.
	gen    uint64
	heal   chan struct{} // closed while not partitioned
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// Start listens on a free port of 127.0.0.1 and forwards to upstream
// (host:port), with no fault.
func Start(upstream string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, upstream: upstream, stop: make(chan struct{}), heal: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	close(p.heal)
	for i := range p.lat {
		p.lat[i].Store(&Latency{})
	}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the host:port clients dial instead of the upstream.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetLatency sets the latency added in one direction (the zero Latency
// removes it).
func (p *Proxy) SetLatency(dir Direction, l Latency) { p.lat[dir].Store(&l) }

// Latency returns the latency in force in one direction.
func (p *Proxy) Latency(dir Direction) Latency { return *p.lat[dir].Load() }

// Refuse makes the upstream unreachable the polite way: open connections
// are closed and new ones are accepted and closed at once (clients see a
// reset or EOF, not a hang) until Accept.
func (p *Proxy) Refuse() {
	p.refused.Store(true)
	p.cut(nil)
}

// cut closes every open connection (a new generation: none dialled before
// is kept) and, unless to is nil, moves the upstream to *to.
func (p *Proxy) cut(to *string) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	if to != nil {
		p.upstream = *to
	}
	p.gen++
	conns := p.conns
	p.conns = map[net.Conn]struct{}{}
	p.mu.Unlock()
	for c := range conns {
		c.Close()
	}
}

// Accept ends Refuse.
func (p *Proxy) Accept() { p.refused.Store(false) }

// Retarget moves the upstream: every open connection is closed (nothing
// held back is delivered later) and new ones go to upstream. It ends a
// Refuse.
func (p *Proxy) Retarget(upstream string) {
	p.cut(&upstream)
	p.refused.Store(false)
}

// Partition cuts the network until Heal: nothing flows on open connections
// and new connections are accepted but never reach the upstream — clients
// hang until their own timeouts. Bytes held back are delivered after Heal,
// as TCP retransmission would.
func (p *Proxy) Partition() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.heal:
		p.heal = make(chan struct{})
	default:
	}
}

// Heal ends Partition.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.heal:
	default:
		close(p.heal)
	}
}

// Close stops listening, closes every connection and waits for the proxy's
// goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	close(p.stop)
	p.mu.Unlock()
	p.Heal()
	err := p.ln.Close()
	p.mu.Lock()
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	for c := range conns {
		c.Close()
	}
	p.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

// gate blocks while partitioned.
func (p *Proxy) gate() {
	p.mu.Lock()
	h := p.heal
	p.mu.Unlock()
	<-h
}

// wait sleeps until due and then while partitioned; false once the proxy
// closes.
func (p *Proxy) wait(due time.Time) bool {
	if d := time.Until(due); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-p.stop:
			t.Stop()
			return false
		}
	}
	p.gate()
	select {
	case <-p.stop:
		return false
	default:
		return true
	}
}

// track adds c to (or removes it from) the open connections; false once the
// proxy is closed.
func (p *Proxy) track(c net.Conn, add bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	if add {
		p.conns[c] = struct{}{}
	} else {
		delete(p.conns, c)
	}
	return true
}

// trackUpstream adds u, a connection to the upstream of generation gen,
// to the open connections; false once the proxy is closed or the upstream
// moved or was cut since u was dialled.
func (p *Proxy) trackUpstream(u net.Conn, gen uint64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.gen != gen {
		return false
	}
	p.conns[u] = struct{}{}
	return true
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if p.refused.Load() || !p.track(c, true) {
			c.Close()
			continue
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

func (p *Proxy) serve(c net.Conn) {
	defer p.wg.Done()
	defer p.track(c, false)
	defer c.Close()
	p.gate()
	p.mu.Lock()
	up, gen := p.upstream, p.gen
	p.mu.Unlock()
	u, err := net.DialTimeout("tcp", up, 5*time.Second)
	if err != nil {
		return
	}
	if p.refused.Load() || !p.trackUpstream(u, gen) {
		u.Close()
		return
	}
	defer p.track(u, false)
	defer u.Close()
	done := make(chan struct{}, 2)
	go func() { p.pipe(u, c, ToServer); done <- struct{}{} }()
	go func() { p.pipe(c, u, ToClient); done <- struct{}{} }()
	<-done
	// One side ended: close both so the other pipe ends too.
	c.Close()
	u.Close()
	<-done
}

// chunk is bytes read from one side, due on the other at a time.
type chunk struct {
	b   []byte
	due time.Time
}

// held bounds the chunks in flight on one direction of one connection: a
// slow writer stops the reader, as a full TCP window would.
const held = 64

// pipe copies src to dst, holding each chunk for the direction's latency
// and while partitioned. The reader stamps each chunk when it arrives and a
// writer sends it when due, so chunks read while others wait are delayed in
// parallel, not one after the other.
func (p *Proxy) pipe(dst, src net.Conn, dir Direction) {
	q := make(chan chunk, held)
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		for ch := range q {
			if !p.wait(ch.due) {
				src.Close()
				for range q {
				}
				return
			}
			if _, err := dst.Write(ch.b); err != nil {
				src.Close()
				for range q {
				}
				return
			}
		}
	}()
	var last time.Time
	buf := make([]byte, 32*1024)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			due := time.Now().Add(p.lat[dir].Load().draw())
			if due.Before(last) {
				due = last // keep the stream in order
			}
			last = due
			q <- chunk{b: append([]byte(nil), buf[:n]...), due: due}
		}
		if err != nil {
			break
		}
	}
	close(q)
	<-wrote
	if tc, ok := dst.(*net.TCPConn); ok {
		tc.CloseWrite()
	}
}

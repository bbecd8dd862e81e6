package chaos

import (
	"net"
	"sync"
	"testing"
	"time"
)

// dbProxy is a TCP proxy between the seckill processes and MariaDB that can
// cut the network: while cut, nothing flows in either direction on open
// connections and new connections are accepted but never reach the server
// — a partition, as clients see it (queries hang until their own timeouts),
// not a polite "connection refused". Bytes held back while cut are
// delivered after heal, as TCP retransmission would.
type dbProxy struct {
	ln       net.Listener
	upstream string

	mu    sync.Mutex
	cut   bool
	heal  chan struct{} // closed on heal
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

func startDBProxy(t testing.TB, upstream string) *dbProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &dbProxy{ln: ln, upstream: upstream, heal: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	close(p.heal)
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *dbProxy) addr() string { return p.ln.Addr().String() }

// partition cuts the network until healNow.
func (p *dbProxy) partition() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.cut {
		p.cut = true
		p.heal = make(chan struct{})
	}
}

func (p *dbProxy) healNow() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		p.cut = false
		close(p.heal)
	}
}

// gate blocks while the network is cut; false when the proxy closes.
func (p *dbProxy) gate() {
	p.mu.Lock()
	h := p.heal
	p.mu.Unlock()
	<-h
}

func (p *dbProxy) track(c net.Conn, add bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns == nil {
		return false
	}
	if add {
		p.conns[c] = struct{}{}
	} else {
		delete(p.conns, c)
	}
	return true
}

func (p *dbProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(c, true) {
			c.Close()
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer p.track(c, false)
			defer c.Close()
			p.gate() // a new connection hangs while cut
			u, err := net.DialTimeout("tcp", p.upstream, 5*time.Second)
			if err != nil {
				return
			}
			if !p.track(u, true) {
				u.Close()
				return
			}
			defer p.track(u, false)
			defer u.Close()
			done := make(chan struct{}, 2)
			go func() { p.pipe(u, c); done <- struct{}{} }()
			go func() { p.pipe(c, u); done <- struct{}{} }()
			<-done
		}()
	}
}

// pipe copies src to dst, holding every chunk while the network is cut.
func (p *dbProxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32*1024)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.gate()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	// Unblock the other direction.
	dst.Close()
	src.Close()
}

func (p *dbProxy) close() {
	p.healNow()
	p.ln.Close()
	p.mu.Lock()
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	for c := range conns {
		c.Close()
	}
	p.wg.Wait()
}

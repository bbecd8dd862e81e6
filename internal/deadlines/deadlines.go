// Package deadlines makes a connection's read and write deadlines cheap to
// move. A server that re-arms its idle, read and write deadlines for every
// keep-alive request (fasthttp does) pays a clock read and a runtime timer
// change for each, three per request; on a small box that is a tenth of a
// cheap request's CPU. Here setting a deadline stores it in the connection;
// one sweeper goroutine per listener looks at every connection every tick
// and, for a deadline that has passed, sets it on the connection for real.
// A Read or Write blocked past its deadline then returns
// os.ErrDeadlineExceeded, as with the connection's own deadline, between the
// deadline and one tick after it; one that starts after the deadline fired
// fails at once. A deadline already due when it is set fires at once (one
// due within a tick of the sweeper's last look, at its next look if it runs
// late). Deadlines are judged on the monotonic clock, as the runtime's are:
// a step of the wall clock moves none of them.
//
// The wrapper is a plain net.Conn: wrap the TCP listener itself, under any
// TLS layer, so that a server still sees its *tls.Conn; optional methods of
// the TCP connection (SetKeepAlive, ReadFrom) are not passed through.
package deadlines

import (
	"math"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Listener wraps a net.Listener so that its connections' deadlines are
// judged by its sweeper. Safe for concurrent use.
type Listener struct {
	net.Listener
	tick  time.Duration
	epoch time.Time    // deadlines are nanoseconds since it, plus one (0: none)
	now   atomic.Int64 // the sweeper's clock at its last look, in the same units

	mu     sync.Mutex
	conns  map[*Conn]struct{}
	closed bool
	wake   chan struct{} // closed by Close: the sweeper stops once no connection is left
	done   chan struct{} // closed when the sweeper has returned

	// testBeforeFired, when set (tests only, before any connection), runs
	// in fireOne between reading a due deadline and marking it fired:
	// where a re-arm races the sweeper.
	testBeforeFired func()
}

// Wrap returns ln with its connections' deadlines swept every tick (at
// least a millisecond).
func Wrap(ln net.Listener, tick time.Duration) *Listener {
	l := &Listener{
		Listener: ln, tick: max(tick, time.Millisecond), epoch: time.Now(),
		conns: make(map[*Conn]struct{}), wake: make(chan struct{}), done: make(chan struct{}),
	}
	l.now.Store(l.clock())
	go l.sweep()
	return l
}

// clock is the monotonic time since epoch, in deadline units.
func (l *Listener) clock() int64 { return int64(time.Since(l.epoch)) + 1 }

// at is t in deadline units: 0 for the zero time, at least 1 (long past)
// otherwise; far futures saturate.
func (l *Listener) at(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	d := t.Sub(l.epoch) // saturates, never wraps
	if d < 0 {
		return 1
	}
	return int64(min(d, math.MaxInt64-1)) + 1
}

// Tick is the sweep interval: how late a deadline may fire.
func (l *Listener) Tick() time.Duration { return l.tick }

// Accept waits for the next connection and returns it wrapped.
func (l *Listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	w := &Conn{Conn: c, l: l}
	l.mu.Lock()
	if l.closed {
		// Accepted as the listener closed: the sweeper may have gone.
		l.mu.Unlock()
		c.Close()
		return nil, net.ErrClosed
	}
	l.conns[w] = struct{}{}
	l.mu.Unlock()
	return w, nil
}

// Close closes the listener. Connections accepted before keep their
// deadlines: the sweeper runs until the last of them is closed.
func (l *Listener) Close() error {
	l.mu.Lock()
	if !l.closed {
		l.closed = true
		close(l.wake)
	}
	l.mu.Unlock()
	return l.Listener.Close()
}

// Conns is the number of open connections the sweeper watches.
func (l *Listener) Conns() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}

func (l *Listener) sweep() {
	defer close(l.done)
	t := time.NewTicker(l.tick)
	defer t.Stop()
	wake := l.wake
	var due []*Conn
	for {
		select {
		case <-t.C:
		case <-wake:
			wake = nil // closed: from now on, only the ticks
		}
		now := l.clock()
		l.now.Store(now)
		l.mu.Lock()
		if l.closed && len(l.conns) == 0 {
			l.mu.Unlock()
			return
		}
		for c := range l.conns {
			if c.r.due(now) || c.w.due(now) {
				due = append(due, c)
			}
		}
		l.mu.Unlock()
		for i, c := range due {
			c.fire(now)
			due[i] = nil
		}
		due = due[:0]
	}
}

// Conn is a connection of a Listener.
type Conn struct {
	net.Conn
	l    *Listener
	r, w deadline
	mu   sync.Mutex // orders firing against re-arming
	once sync.Once
}

// deadline is one direction's wanted deadline and whether it was set on
// the connection for real.
type deadline struct {
	at    atomic.Int64 // Listener.at units; 0: none
	fired atomic.Bool  // the connection holds a past deadline for this direction
}

func (d *deadline) due(now int64) bool {
	at := d.at.Load()
	return at != 0 && at <= now && !d.fired.Load()
}

// SetReadDeadline sets the read deadline; the zero time clears it.
func (c *Conn) SetReadDeadline(t time.Time) error { return c.set(&c.r, true, t) }

// SetWriteDeadline sets the write deadline; the zero time clears it.
func (c *Conn) SetWriteDeadline(t time.Time) error { return c.set(&c.w, false, t) }

// SetDeadline sets both deadlines.
func (c *Conn) SetDeadline(t time.Time) error {
	if err := c.set(&c.r, true, t); err != nil {
		return err
	}
	return c.set(&c.w, false, t)
}

func (c *Conn) set(d *deadline, read bool, t time.Time) error {
	at := c.l.at(t)
	// Store first, then look at fired; the sweeper sets fired first, then
	// looks at the deadline again (fire): one of the two sees the other.
	d.at.Store(at)
	if d.fired.Load() {
		c.mu.Lock()
		if d.fired.Load() {
			if err := c.real(read, time.Time{}); err != nil {
				c.mu.Unlock()
				return err
			}
			d.fired.Store(false)
		}
		c.mu.Unlock()
	}
	// A deadline within a tick of the sweeper's clock may be due already:
	// only those read the clock.
	if at != 0 && at <= c.l.now.Load()+int64(c.l.tick) {
		if now := c.l.clock(); at <= now {
			c.fire(now)
		}
	}
	return nil
}

// fire sets each deadline of c that is due at now on the connection.
func (c *Conn) fire(now int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fireOne(&c.r, true, now)
	c.fireOne(&c.w, false, now)
}

func (c *Conn) fireOne(d *deadline, read bool, now int64) {
	at := d.at.Load()
	if at == 0 || at > now || d.fired.Load() {
		return
	}
	if h := c.l.testBeforeFired; h != nil {
		h()
	}
	d.fired.Store(true)
	if d.at.Load() != at { // re-armed meanwhile: its setter did not see fired
		d.fired.Store(false)
		return
	}
	_ = c.real(read, c.l.epoch.Add(time.Duration(at-1))) // an error: the connection is closed
}

func (c *Conn) real(read bool, t time.Time) error {
	if read {
		return c.Conn.SetReadDeadline(t)
	}
	return c.Conn.SetWriteDeadline(t)
}

// Close closes the connection and stops watching it.
func (c *Conn) Close() error {
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.conns, c)
		c.l.mu.Unlock()
	})
	return c.Conn.Close()
}

package deadlines

import (
	"errors"
	"net"
	"os"
	"sync"
	"testing"
	"time"
)

// pair is a wrapped server side and a plain client side of one loopback
// connection.
func pair(t *testing.T, tick time.Duration) (*Listener, *Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := Wrap(ln, tick)
	t.Cleanup(func() { l.Close() })
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	s, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return l, s.(*Conn), client
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) && errors.As(err, &ne) && ne.Timeout()
}

func TestBlockedReadTimesOutBetweenItsDeadlineAndATickAfter(t *testing.T) {
	const tick = 20 * time.Millisecond
	_, s, _ := pair(t, tick)
	start := time.Now()
	if err := s.SetReadDeadline(start.Add(100 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	_, err := s.Read(make([]byte, 1))
	took := time.Since(start)
	if !isTimeout(err) {
		t.Fatalf("read: %v, want a timeout (os.ErrDeadlineExceeded)", err)
	}
	if took < 100*time.Millisecond || took > 100*time.Millisecond+tick+150*time.Millisecond {
		t.Fatalf("read timed out after %v, want 100ms to 100ms + a tick (%v)", took, tick)
	}
}

func TestBlockedWriteTimesOut(t *testing.T) {
	_, s, _ := pair(t, 10*time.Millisecond) // the client never reads
	if err := s.SetWriteDeadline(time.Now().Add(100 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	var err error
	for i := 0; i < 1000 && err == nil; i++ { // until the socket buffers fill
		_, err = s.Write(buf)
	}
	if !isTimeout(err) {
		t.Fatalf("write to a client that reads nothing: %v, want a timeout", err)
	}
	// The read direction is untouched.
	if s.r.fired.Load() {
		t.Fatal("the write deadline fired the read deadline")
	}
}

func TestReArmedDeadlineNeverFires(t *testing.T) {
	_, s, client := pair(t, 5*time.Millisecond)
	done := make(chan error, 1)
	go func() {
		_, err := s.Read(make([]byte, 1))
		done <- err
	}()
	// Keep moving the deadline 30ms ahead for ten times that long.
	for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if err := s.SetReadDeadline(time.Now().Add(30 * time.Millisecond)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SetReadDeadline(time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("read under a deadline always moved ahead: %v", err)
	}
}

func TestZeroClearsTheDeadline(t *testing.T) {
	_, s, client := pair(t, 5*time.Millisecond)
	if err := s.SetReadDeadline(time.Now().Add(20 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if err := s.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(150*time.Millisecond, func() { client.Write([]byte("x")) })
	if _, err := s.Read(make([]byte, 1)); err != nil {
		t.Fatalf("read with the deadline cleared: %v", err)
	}
}

func TestFiredDeadlineIsClearedByTheNextOne(t *testing.T) {
	_, s, client := pair(t, 5*time.Millisecond)
	if err := s.SetReadDeadline(time.Now().Add(20 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Read(make([]byte, 1)); !isTimeout(err) {
		t.Fatalf("first read: %v, want a timeout", err)
	}
	// Past its deadline every read fails at once, as net.Conn's do.
	if _, err := s.Read(make([]byte, 1)); !isTimeout(err) {
		t.Fatalf("read after the deadline: %v, want a timeout", err)
	}
	if err := s.SetReadDeadline(time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Read(make([]byte, 1)); err != nil {
		t.Fatalf("read after a new deadline: %v", err)
	}
}

func TestDeadlineAlreadyDueFiresAtOnce(t *testing.T) {
	_, s, _ := pair(t, time.Hour) // the sweeper never looks
	start := time.Now()
	if err := s.SetDeadline(start.Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Read(make([]byte, 1)); !isTimeout(err) {
		t.Fatalf("read: %v, want a timeout", err)
	}
	if _, err := s.Write([]byte("x")); !isTimeout(err) {
		t.Fatalf("write: %v, want a timeout", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("a deadline already due took %v to fire", took)
	}
}

// TestReArmRacesTheSweeper re-arms deadlines that are just due while the
// sweeper fires them every millisecond: a read made after a re-arm must
// never see the old deadline.
func TestReArmRacesTheSweeper(t *testing.T) {
	_, s, client := pair(t, time.Millisecond)
	buf := make([]byte, 1)
	for i := range 300 {
		if err := s.SetReadDeadline(time.Now().Add(time.Duration(i%3) * 500 * time.Microsecond)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(i%4) * 400 * time.Microsecond)
		if err := s.SetReadDeadline(time.Now().Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		if _, err := client.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Read(buf); err != nil {
			t.Fatalf("round %d: read after a re-arm: %v", i, err)
		}
	}
}

func TestSweeperStopsAfterTheLastConnection(t *testing.T) {
	l, s, _ := pair(t, time.Millisecond)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.done:
		t.Fatal("the sweeper stopped with a connection still open")
	case <-time.After(20 * time.Millisecond):
	}
	// An open connection keeps its deadlines after the listener closed.
	if err := s.SetReadDeadline(time.Now().Add(10 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Read(make([]byte, 1)); !isTimeout(err) {
		t.Fatalf("read after the listener closed: %v, want a timeout", err)
	}
	s.Close()
	if n := l.Conns(); n != 0 {
		t.Fatalf("%d connections watched after the last closed", n)
	}
	select {
	case <-l.done:
	case <-time.After(5 * time.Second):
		t.Fatal("the sweeper still runs after the listener and its connections closed")
	}
}

func TestManyConnectionsConcurrently(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := Wrap(ln, 2*time.Millisecond)
	defer l.Close()
	const n = 32
	var wg sync.WaitGroup
	wg.Go(func() {
		for range n {
			c, err := l.Accept()
			if err != nil {
				t.Error(err)
				return
			}
			wg.Go(func() {
				defer c.Close()
				buf := make([]byte, 1)
				for {
					// A fresh deadline per read, as a keep-alive server
					// sets one per request; the last one lapses.
					c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
					if _, err := c.Read(buf); err != nil {
						if !isTimeout(err) {
							t.Errorf("read: %v, want data or a timeout", err)
						}
						return
					}
					c.SetWriteDeadline(time.Now().Add(time.Second))
					if _, err := c.Write(buf); err != nil {
						t.Errorf("write: %v", err)
						return
					}
				}
			})
		}
	})
	for range n {
		wg.Go(func() {
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			buf := make([]byte, 1)
			for range 200 {
				if _, err := c.Write(buf); err != nil {
					t.Error(err)
					return
				}
				if _, err := c.Read(buf); err != nil {
					t.Errorf("echo: %v", err)
					return
				}
			}
			// Idle now: the server side's deadline lapses and it closes.
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := c.Read(buf); err == nil {
				t.Error("the server kept an idle connection open past its deadline")
			}
		})
	}
	wg.Wait()
	if c := l.Conns(); c != 0 {
		t.Fatalf("%d connections watched after all closed", c)
	}
}

func BenchmarkSetReadDeadline(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer client.Close()
	raw, err := ln.Accept()
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()
	l := &Listener{tick: 100 * time.Millisecond, epoch: time.Now()}
	l.now.Store(l.clock())
	wrapped := &Conn{Conn: raw, l: l}
	for _, c := range []struct {
		name string
		conn net.Conn
	}{{"net", raw}, {"swept", wrapped}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			}
		})
	}
}

// TestReArmBetweenTheSweepersLookAndItsMark re-arms a deadline at the one
// point where the sweeper has read it as due but not yet marked it fired:
// the sweeper must see the new deadline and leave the connection alone.
func TestReArmBetweenTheSweepersLookAndItsMark(t *testing.T) {
	l, s, client := pair(t, time.Hour) // the sweeper never looks by itself
	if err := s.SetReadDeadline(time.Now().Add(5 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond)
	rearmed := false
	l.testBeforeFired = func() {
		if !rearmed {
			rearmed = true
			if err := s.SetReadDeadline(time.Now().Add(time.Minute)); err != nil {
				t.Error(err)
			}
		}
	}
	s.fire(l.clock())
	if !rearmed {
		t.Fatal("the sweeper did not find the deadline due")
	}
	if s.r.fired.Load() {
		t.Fatal("a deadline re-armed before it was marked was fired anyway")
	}
	if _, err := client.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Read(make([]byte, 1)); err != nil {
		t.Fatalf("read under the re-armed deadline: %v", err)
	}
}

// blockedListener's Accept waits for release; its Close closes nothing
// until the test ends, so that a connection can be accepted after it.
type blockedListener struct {
	net.Listener
	release chan struct{}
}

func (b *blockedListener) Accept() (net.Conn, error) {
	<-b.release
	return b.Listener.Accept()
}

func (b *blockedListener) Close() error { return nil }

func TestAcceptedAsTheListenerClosesIsRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	b := &blockedListener{Listener: ln, release: make(chan struct{})}
	l := Wrap(b, time.Millisecond)
	type accepted struct {
		c   net.Conn
		err error
	}
	got := make(chan accepted, 1)
	go func() {
		c, err := l.Accept()
		got <- accepted{c, err}
	}()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	l.Close()
	<-l.done // no connection was watched: the sweeper is gone
	close(b.release)
	a := <-got
	if !errors.Is(a.err, net.ErrClosed) {
		if a.c != nil {
			a.c.Close()
		}
		t.Fatalf("accept after close: %v, %v; want net.ErrClosed (no sweeper would time it out)", a.c, a.err)
	}
	client.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := client.Read(make([]byte, 1)); err == nil {
		t.Fatal("the connection accepted after close was left open")
	}
}

func TestFarDeadlines(t *testing.T) {
	_, s, client := pair(t, 5*time.Millisecond)
	// Far past: due at once.
	if err := s.SetReadDeadline(time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Read(make([]byte, 1)); !isTimeout(err) {
		t.Fatalf("read under a deadline in 1600: %v, want a timeout", err)
	}
	// Far future: never.
	if err := s.SetReadDeadline(time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(50*time.Millisecond, func() { client.Write([]byte("x")) })
	if _, err := s.Read(make([]byte, 1)); err != nil {
		t.Fatalf("read under a deadline in 9999: %v", err)
	}
}

package faultproxy

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"
)

// echoServer answers every line with the same line, on a free port.
func echoServer(t *testing.T) string { return taggedServer(t, "") }

func start(t *testing.T) *Proxy {
	t.Helper()
	p, err := Start(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	})
	return p
}

func dial(t *testing.T, p *Proxy) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.DialTimeout("tcp", p.Addr(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, bufio.NewReader(c)
}

// roundTrip sends one line and returns how long its echo took.
func roundTrip(t *testing.T, c net.Conn, r *bufio.Reader, line string) time.Duration {
	t.Helper()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	t0 := time.Now()
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		t.Fatal(err)
	}
	got, err := r.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	if got != line+"\n" {
		t.Fatalf("echo %q, want %q", got, line+"\n")
	}
	return time.Since(t0)
}

func TestProxyForwardsWithoutFault(t *testing.T) {
	p := start(t)
	c, r := dial(t, p)
	for _, line := range []string{"a", "bb", "ccc"} {
		if d := roundTrip(t, c, r, line); d > 200*time.Millisecond {
			t.Errorf("round trip without fault took %v", d)
		}
	}
}

func TestProxyDelaysEachDirection(t *testing.T) {
	for _, tc := range []struct {
		name string
		dir  Direction
	}{
		{"requests are held on their way to the server", ToServer},
		{"answers are held on their way back", ToClient},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := start(t)
			c, r := dial(t, p)
			p.SetLatency(tc.dir, Latency{Delay: 150 * time.Millisecond})
			if got := p.Latency(tc.dir); got.Delay != 150*time.Millisecond {
				t.Fatalf("Latency = %+v", got)
			}
			if d := roundTrip(t, c, r, "x"); d < 150*time.Millisecond || d > time.Second {
				t.Errorf("round trip %v, want about 150ms", d)
			}
			p.SetLatency(tc.dir, Latency{})
			if d := roundTrip(t, c, r, "y"); d > 100*time.Millisecond {
				t.Errorf("round trip after removing the delay %v", d)
			}
		})
	}
}

func TestProxyJitterStaysInRange(t *testing.T) {
	l := Latency{Delay: 200 * time.Millisecond, Jitter: 100 * time.Millisecond}
	lo, hi := time.Hour, time.Duration(0)
	for range 2000 {
		d := l.draw()
		lo, hi = min(lo, d), max(hi, d)
	}
	if lo < 100*time.Millisecond || hi > 300*time.Millisecond {
		t.Fatalf("draws in [%v, %v], want within [100ms, 300ms]", lo, hi)
	}
	if hi-lo < 150*time.Millisecond {
		t.Fatalf("draws in [%v, %v]: jitter barely spread them", lo, hi)
	}
	if d := (Latency{Delay: 10 * time.Millisecond, Jitter: 50 * time.Millisecond}); func() bool {
		for range 1000 {
			if d.draw() < 0 {
				return true
			}
		}
		return false
	}() {
		t.Fatal("a draw went below zero")
	}
}

// A slow dependency is slow for everyone at once, not one request after the
// other: many connections waiting together take about one delay.
func TestProxyDelaysConnectionsInParallel(t *testing.T) {
	p := start(t)
	p.SetLatency(ToClient, Latency{Delay: 200 * time.Millisecond})
	const n = 20
	var wg sync.WaitGroup
	t0 := time.Now()
	for i := range n {
		c, r := dial(t, p)
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.SetDeadline(time.Now().Add(5 * time.Second))
			io.WriteString(c, "p\n")
			if _, err := r.ReadString('\n'); err != nil {
				t.Errorf("conn %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	if d := time.Since(t0); d > 1500*time.Millisecond {
		t.Fatalf("%d parallel round trips took %v: the delay was serialised", n, d)
	}
}

func TestProxyKeepsAStreamInOrderUnderJitter(t *testing.T) {
	p := start(t)
	p.SetLatency(ToServer, Latency{Delay: 20 * time.Millisecond, Jitter: 20 * time.Millisecond})
	c, r := dial(t, p)
	c.SetDeadline(time.Now().Add(10 * time.Second))
	const n = 200
	go func() {
		for i := range n {
			io.WriteString(c, string(rune('A'+i%26))+"\n")
			time.Sleep(time.Millisecond)
		}
	}()
	for i := range n {
		got, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if want := string(rune('A'+i%26)) + "\n"; got != want {
			t.Fatalf("line %d = %q, want %q: the stream was reordered", i, got, want)
		}
	}
}

func TestProxyRefuseClosesAndRejects(t *testing.T) {
	p := start(t)
	c, r := dial(t, p)
	roundTrip(t, c, r, "before")
	p.Refuse()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := r.ReadString('\n'); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("open connection after Refuse: read err %v, want it closed", err)
	}
	c2, r2 := dial(t, p)
	c2.SetDeadline(time.Now().Add(2 * time.Second))
	io.WriteString(c2, "refused\n")
	if _, err := r2.ReadString('\n'); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("new connection while refusing: read err %v, want it closed at once", err)
	}
	p.Accept()
	c3, r3 := dial(t, p)
	roundTrip(t, c3, r3, "after")
}

func TestProxyPartitionHoldsBytesUntilHeal(t *testing.T) {
	p := start(t)
	c, r := dial(t, p)
	roundTrip(t, c, r, "before")
	p.Partition()
	c.SetDeadline(time.Now().Add(300 * time.Millisecond))
	io.WriteString(c, "held\n")
	if _, err := r.ReadString('\n'); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read while partitioned: %v, want a timeout", err)
	}
	c2, err := net.DialTimeout("tcp", p.Addr(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	r2 := bufio.NewReader(c2)
	c2.SetDeadline(time.Now().Add(300 * time.Millisecond))
	io.WriteString(c2, "new\n")
	if _, err := r2.ReadString('\n'); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("new connection while partitioned: %v, want a hang", err)
	}
	p.Heal()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if got, err := r.ReadString('\n'); err != nil || got != "held\n" {
		t.Fatalf("after heal: %q, %v; want the held line", got, err)
	}
	c2.SetDeadline(time.Now().Add(2 * time.Second))
	if got, err := r2.ReadString('\n'); err != nil || got != "new\n" {
		t.Fatalf("new connection after heal: %q, %v", got, err)
	}
}

func TestProxyCloseEndsOpenConnections(t *testing.T) {
	p, err := Start(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	c, r := dial(t, p)
	roundTrip(t, c, r, "x")
	p.SetLatency(ToClient, Latency{Delay: time.Hour})
	io.WriteString(c, "stuck\n")
	done := make(chan error, 1)
	go func() { done <- p.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("Close hung on a connection holding a delayed chunk")
	}
	if _, err := net.DialTimeout("tcp", p.Addr(), 200*time.Millisecond); err == nil {
		t.Fatal("the proxy still accepts after Close")
	}
}

// taggedServer answers every line with tag and the line, on a free port.
func taggedServer(t *testing.T, tag string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					l, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := io.WriteString(c, tag+l); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// A moved upstream (a Redis master's address moved to its promoted
// replica): open connections are closed, so nothing reaches the old one
// any more, and new ones reach the new one.
func TestProxyRetargetMovesTheUpstream(t *testing.T) {
	p, err := Start(taggedServer(t, "old:"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	ask := func(c net.Conn, r *bufio.Reader) (string, error) {
		c.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := io.WriteString(c, "x\n"); err != nil {
			return "", err
		}
		return r.ReadString('\n')
	}
	c, r := dial(t, p)
	if got, err := ask(c, r); err != nil || got != "old:x\n" {
		t.Fatalf("before the move: %q %v", got, err)
	}
	p.Retarget(taggedServer(t, "new:"))
	if got, err := ask(c, r); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a connection opened before the move answered %q %v, want it closed", got, err)
	}
	c2, r2 := dial(t, p)
	if got, err := ask(c2, r2); err != nil || got != "new:x\n" {
		t.Fatalf("after the move: %q %v, want the new upstream's answer", got, err)
	}
	// A Refuse then a Retarget: the move ends the refusal.
	p.Refuse()
	p.Retarget(taggedServer(t, "third:"))
	c3, r3 := dial(t, p)
	if got, err := ask(c3, r3); err != nil || got != "third:x\n" {
		t.Fatalf("a move after a refusal: %q %v", got, err)
	}
}

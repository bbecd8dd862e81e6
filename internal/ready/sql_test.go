package ready

import (
	"context"
	"io"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"seckill/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func itoa(i int) string { return strconv.Itoa(i) }

// TestSQLWaitsForTheDatabase: the database's port accepts nothing at first
// (the server is still starting); a Waiter keeps checking and returns once
// connections reach a real MariaDB.
func TestSQLWaitsForTheDatabase(t *testing.T) {
	dsn := testenv.MySQL(t)
	m := regexp.MustCompile(`tcp\(([^)]+)\)`).FindStringSubmatch(dsn)
	if m == nil {
		t.Fatalf("DSN %q names no tcp(host:port)", dsn)
	}
	if err := SQL("mysql", dsn)(context.Background()); err != nil {
		t.Fatalf("the database itself: %v", err)
	}
	port := testenv.FreePort(t)
	late := strings.Replace(dsn, m[0], "tcp(127.0.0.1:"+itoa(port)+")", 1)
	check := SQL("mysql", late)
	if err := check(context.Background()); err == nil {
		t.Fatal("ready with nothing listening")
	}
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		done <- Waiter{Timeout: 30 * time.Second, MaxPause: 100 * time.Millisecond}.Wait(context.Background(),
			Dependency{Name: "database", Check: check})
	}()
	time.Sleep(time.Second)
	select {
	case err := <-done:
		t.Fatalf("the wait ended with nothing listening: %v", err)
	default:
	}
	forward(t, "127.0.0.1:"+itoa(port), m[1])
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Wait: %v", err)
		}
		t.Logf("database ready after %v", time.Since(start).Round(time.Millisecond))
	case <-time.After(20 * time.Second):
		t.Fatal("the wait did not end once the database accepted connections")
	}
}

// forward listens on from and copies every connection to and from to,
// until the test ends.
func forward(t *testing.T, from, to string) {
	t.Helper()
	ln, err := net.Listen("tcp", from)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.DialTimeout("tcp", to, 2*time.Second)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, u)
			mu.Unlock()
			wg.Go(func() { _, _ = io.Copy(u, c); u.Close() })
			wg.Go(func() { _, _ = io.Copy(c, u); c.Close() })
		}
	})
}

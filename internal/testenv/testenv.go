// Package testenv starts the real servers tests run against: redis-server
// children on free loopback ports, a MariaDB server (LaunchMariaDB: shared
// per test binary or named by $SECKILL_TEST_MYSQL_DSN, one fresh database
// per test) and the embedded Kafka-protocol broker kfake.
// Nothing here mocks a server's behaviour. A missing binary fails the test
// with the command that installs it; it never skips.
//
// It also holds the helpers every test shares, written once: Eventually
// (the one poll loop), Metric (the one metric reader), FreePort, and Proc,
// a child process started and stopped by its PID with its output in a log
// file (the chaos suite's processes and the bench harness's). Proc takes no
// *testing.T, so the bench harness, a plain program, uses it too; `seckill
// dev` (cmd/seckill/devserver) does not: production code does not link the
// test environment.
package testenv

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
)

// FreePort asks the kernel for a free TCP port on 127.0.0.1.
func FreePort(t testing.TB) int {
	t.Helper()
	p, err := freePort()
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	return p
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Main runs the package's tests and then stops the servers shared by the
// test binary (MariaDB). Use it as TestMain: func TestMain(m *testing.M) { testenv.Main(m) }.
func Main(m *testing.M) {
	code := m.Run()
	stopShared()
	os.Exit(code)
}

var (
	sharedMu    sync.Mutex
	sharedStops []func()
)

func onStopShared(f func()) {
	sharedMu.Lock()
	sharedStops = append(sharedStops, f)
	sharedMu.Unlock()
}

func stopShared() {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	for i := len(sharedStops) - 1; i >= 0; i-- {
		sharedStops[i]()
	}
	sharedStops = nil
}

func lookBinary(names ...string) (string, error) {
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p, nil
		}
		for _, dir := range []string{"/usr/sbin", "/usr/bin", "/usr/local/bin"} {
			p := filepath.Join(dir, n)
			if _, err := os.Stat(p); err == nil {
				return p, nil
			}
		}
	}
	return "", fmt.Errorf("none of %v found on PATH", names)
}

func itoa(i int) string { return strconv.Itoa(i) }

// Long marks a test that runs whole processes, a browser or a large crowd:
// go test -short (make check, the day-to-day run) skips it; make test runs
// it.
func Long(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("long: make test runs it; make check (go test -short) does not")
	}
}

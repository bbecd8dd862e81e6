package testenv

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startState is MariaDBStartState with the server stopped when the test
// ends, whatever the test did to it.
func startState(t *testing.T, state string) *MariaDB {
	t.Helper()
	m, err := MariaDBStartState(state)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { _, _ = m.Stop() })
	return m
}

// useDSN creates a database on base, writes a row and reads it back.
func useDSN(t *testing.T, base string) {
	t.Helper()
	dsn, err := MySQLDatabase(base, "use_dsn")
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var got int
	for _, q := range []string{"CREATE TABLE t (n INT)", "INSERT INTO t VALUES (42)"} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := db.QueryRow("SELECT n FROM t").Scan(&got); err != nil || got != 42 {
		t.Fatalf("SELECT n = %d, %v; want 42", got, err)
	}
}

// assertGone checks a stopped server left nothing: its PID is not a
// mariadbd, its temp dir and the state file are removed.
func assertGone(t *testing.T, m *MariaDB, state string) {
	t.Helper()
	if m.Running() {
		t.Fatalf("pid %d still runs mariadbd on %s", m.PID, m.Dir)
	}
	if _, err := os.Stat(m.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temp dir %s: %v, want it removed", m.Dir, err)
	}
	if _, err := os.Stat(state); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("state file %s: %v, want it removed", state, err)
	}
}

func TestMariaDBStartsAndStopsByItsState(t *testing.T) {
	state := filepath.Join(t.TempDir(), "mariadb.state")
	m := startState(t, state)
	if want := fmt.Sprintf("root@tcp(127.0.0.1:%d)/", m.Port); m.DSN != want {
		t.Fatalf("DSN %q, want %q", m.DSN, want)
	}
	useDSN(t, m.DSN)

	got, err := MariaDBFromState(state)
	if err != nil || got.PID != m.PID || got.DSN != m.DSN || !got.Running() {
		t.Fatalf("from the state file: %+v, %v; want pid %d, %s, running", got, err, m.PID, m.DSN)
	}
	if _, err := MariaDBStartState(state); err == nil || !strings.Contains(err.Error(), "already running") {
		t.Fatalf("a second start on a running server's state: %v, want already running", err)
	}
	useDSN(t, m.DSN) // the refused start left the first server alone

	// Stopped from the state file alone, as another process would.
	stopped, running, err := MariaDBStopState(state)
	if err != nil || !running || stopped.PID != m.PID {
		t.Fatalf("stop: %+v, running %v, %v; want pid %d stopped", stopped, running, err, m.PID)
	}
	assertGone(t, m, state)
	if _, running, err := MariaDBStopState(state); err != nil || running {
		t.Fatalf("a second stop: running %v, %v; want nothing to do", running, err)
	}
}

// A state file left behind names a PID that the system may have given to
// another process: start must neither trust nor signal it.
func TestMariaDBStaleStateIsReplaced(t *testing.T) {
	old, err := os.MkdirTemp("", mariadbPrefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(old) })
	// Our own PID: alive, and not a mariadbd on that data directory.
	b, _ := json.Marshal(MariaDB{Dir: old, PID: os.Getpid(), Port: 1, DSN: "root@tcp(127.0.0.1:1)/"})
	if err := os.WriteFile(filepath.Join(old, mariadbInfo), b, 0o644); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(t.TempDir(), "mariadb.state")
	if err := os.WriteFile(state, []byte(old+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m := startState(t, state)
	if _, err := os.Stat(old); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the stale temp dir %s: %v, want it removed", old, err)
	}
	if m.Dir == old || m.PID == os.Getpid() {
		t.Fatalf("started %+v over the stale state", m)
	}
	useDSN(t, m.DSN)
	if _, _, err := MariaDBStopState(state); err != nil {
		t.Fatal(err)
	}
	assertGone(t, m, state)
}

// A crashed server is not signalled again; stop cleans up after it and
// the next start from the same state file gets a new one.
func TestMariaDBCrashedIsCleanedUp(t *testing.T) {
	state := filepath.Join(t.TempDir(), "mariadb.state")
	m := startState(t, state)
	if err := syscall.Kill(m.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	Eventually(t, "the killed mariadbd gone", 10*time.Second, func() bool { return !m.Running() })
	stopped, running, err := MariaDBStopState(state)
	if err != nil || running || stopped == nil {
		t.Fatalf("stop after a crash: %+v, running %v, %v; want a server that was not running", stopped, running, err)
	}
	assertGone(t, m, state)

	again := startState(t, state)
	useDSN(t, again.DSN)
	if _, _, err := MariaDBStopState(state); err != nil {
		t.Fatal(err)
	}
	assertGone(t, again, state)
}

// The command's server outlives the command: make starts it in one
// shell line and stops it in a trap.
func TestMariaDBCommandDetaches(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "mariadb")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/mariadb").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	state := filepath.Join(t.TempDir(), "mariadb.state")
	run := func(verb string) string {
		cmd := exec.Command(bin, verb)
		cmd.Env = append(os.Environ(), "SECKILL_MARIADB_STATE="+state)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("mariadb %s: %v\n%s", verb, err, stderr.String())
		}
		return strings.TrimSpace(string(out))
	}
	dsn := run("start")
	m, err := MariaDBFromState(state)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = m.Stop() })
	if dsn != m.DSN || !m.Running() {
		t.Fatalf("start printed %q; state %+v (running %v)", dsn, m, m.Running())
	}
	useDSN(t, dsn)
	if got := run("dsn"); got != dsn {
		t.Fatalf("dsn printed %q, want %q", got, dsn)
	}
	run("stop")
	assertGone(t, m, state)
}

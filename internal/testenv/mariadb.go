package testenv

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	_ "github.com/go-sql-driver/mysql" // driver for the readiness probe
)

// MariaDB is a throwaway mariadbd on a free 127.0.0.1 port: a data
// directory initialised for it in a temp dir of its own, root without a
// password and grant tables off (loopback only, for tests and the bench
// tools). It is the one starter of the project's MariaDB: testenv.MySQL
// runs one per test binary, the bench tools and the mutation check run
// one each, and `go run ./internal/testenv/cmd/mariadb start|stop` (what
// scripts/mariadb-test.sh and so make test run) one that outlives the
// command, found again through a state file.
type MariaDB struct {
	Dir  string `json:"dir"`  // the temp dir: data/, sock, error.log, install.log
	Port int    `json:"port"` // on 127.0.0.1
	PID  int    `json:"pid"`
	DSN  string `json:"dsn"` // root@tcp(127.0.0.1:PORT)/ — append a database name

	exited chan struct{} // closed when the server exits; nil if we are not its parent
}

// mariadbPrefix begins the name of every temp dir LaunchMariaDB makes;
// nothing else is ever removed.
const mariadbPrefix = "seckill-mariadb."

// mariadbInfo is the file in Dir that records the server, for Stop from
// another process.
const mariadbInfo = "mariadb.json"

// LaunchMariaDB initialises a data directory and starts mariadbd on a free
// port, and returns once the server answers as ours. Attached, the server
// dies with the calling process (Pdeathsig), as a test server should;
// detached, it runs in a session of its own and outlives the caller, for a
// command that starts it for others and exits. Either way Stop stops it by
// its PID.
func LaunchMariaDB(detached bool) (*MariaDB, error) {
	bin, err := lookBinary("mariadbd", "mysqld")
	if err != nil {
		return nil, fmt.Errorf("mariadbd is required by the tests (apt-get install -y mariadb-server, or make deps): %w", err)
	}
	install, err := lookBinary("mariadb-install-db", "mysql_install_db")
	if err != nil {
		return nil, fmt.Errorf("mariadb-install-db (apt-get install -y mariadb-server): %w", err)
	}
	dir, err := os.MkdirTemp("", mariadbPrefix)
	if err != nil {
		return nil, err
	}
	m := &MariaDB{Dir: dir}
	out, err := exec.Command(install, "--no-defaults", "--datadir="+m.data(), "--user=root",
		"--auth-root-authentication-method=normal", "--skip-test-db").CombinedOutput()
	if err != nil {
		m.removeDir()
		return nil, fmt.Errorf("%s: %v\n%s", install, err, out)
	}
	// freePort's port is free when asked, not necessarily when mariadbd
	// binds it; a server that cannot bind exits, and another port is
	// tried.
	for range 5 {
		if err = m.start(bin, detached); err == nil {
			return m, nil
		}
	}
	m.removeDir()
	return nil, err
}

func (m *MariaDB) data() string { return filepath.Join(m.Dir, "data") }

func (m *MariaDB) start(bin string, detached bool) error {
	port, err := freePort()
	if err != nil {
		return fmt.Errorf("free port: %w", err)
	}
	m.Port = port
	m.DSN = fmt.Sprintf("root@tcp(127.0.0.1:%d)/", port)
	errLog := filepath.Join(m.Dir, "error.log")
	_ = os.Remove(errLog)
	// Every standard stream goes to a file: a caller that reads the
	// command's output through $(...) waits for every holder of the pipe.
	f, err := os.OpenFile(filepath.Join(m.Dir, "stdout.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	cmd := exec.Command(bin, "--no-defaults", "--datadir="+m.data(), "--user=root",
		"--port="+itoa(port), "--bind-address=127.0.0.1", "--socket="+filepath.Join(m.Dir, "sock"),
		"--pid-file="+filepath.Join(m.Dir, "mariadbd.pid"), "--log-error="+errLog,
		"--skip-grant-tables", "--skip-name-resolve", "--skip-log-bin",
		"--innodb-flush-log-at-trx-commit=2", "--innodb-buffer-pool-size=256M",
		"--max-connections=1000")
	cmd.Stdout, cmd.Stderr = f, f
	if detached {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	} else {
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start mariadbd: %w", err)
	}
	m.PID = cmd.Process.Pid
	m.exited = make(chan struct{})
	go func(done chan struct{}) { _ = cmd.Wait(); close(done) }(m.exited)
	if err := m.await(60 * time.Second); err != nil {
		_, _ = m.stopProcess()
		log, _ := os.ReadFile(errLog)
		return fmt.Errorf("mariadbd on 127.0.0.1:%d: %v\n%s", port, err, log)
	}
	b, _ := json.Marshal(m)
	if err := os.WriteFile(filepath.Join(m.Dir, mariadbInfo), b, 0o644); err != nil {
		// Unrecorded, no other process could stop it.
		_, _ = m.stopProcess()
		return err
	}
	return nil
}

// await waits until the server answers on m.Port with our data directory:
// a server that exits (the port was taken) or another server on the port
// is an error at once.
func (m *MariaDB) await(d time.Duration) error {
	deadline := time.Now().Add(d)
	want := filepath.Clean(m.data())
	for {
		select {
		case <-m.exited:
			return errors.New("mariadbd exited at start (port taken?)")
		default:
		}
		datadir, err := m.datadir()
		switch {
		case err == nil && filepath.Clean(datadir) == want:
			return nil
		case err == nil:
			return fmt.Errorf("another server (datadir %s) answers on port %d", datadir, m.Port)
		case time.Now().After(deadline):
			return fmt.Errorf("not ready after %v: %w", d, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (m *MariaDB) datadir() (string, error) {
	db, err := sql.Open("mysql", m.DSN+"?timeout=2s")
	if err != nil {
		return "", err
	}
	defer db.Close()
	var dir string
	err = db.QueryRow("SELECT @@datadir").Scan(&dir)
	return dir, err
}

// Running reports whether m.PID is still the mariadbd on m.Dir's data: a
// PID that has exited or been reused by another process is not.
func (m *MariaDB) Running() bool {
	if m.PID <= 0 {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", m.PID))
	if err != nil {
		return false
	}
	// An exited child not yet reaped has an empty command line.
	return bytes.Contains(b, []byte("--datadir="+m.data()+"\x00"))
}

// Stop sends SIGTERM to the server by its PID — only while Running says
// it is ours — waits up to 30 s for a clean shutdown, then SIGKILL; then
// it removes the temp dir. It reports whether the server was running.
func (m *MariaDB) Stop() (running bool, err error) {
	if running, err = m.stopProcess(); err != nil {
		return running, err
	}
	m.removeDir()
	return running, nil
}

func (m *MariaDB) stopProcess() (running bool, err error) {
	running = m.Running()
	if running {
		_ = syscall.Kill(m.PID, syscall.SIGTERM)
		if !m.waitGone(30 * time.Second) {
			_ = syscall.Kill(m.PID, syscall.SIGKILL)
			if !m.waitGone(10 * time.Second) {
				return true, fmt.Errorf("mariadbd pid %d survived SIGKILL", m.PID)
			}
		}
	}
	if m.exited != nil {
		<-m.exited
	}
	return running, nil
}

func (m *MariaDB) waitGone(d time.Duration) bool {
	deadline := time.Now().Add(d)
	for m.Running() {
		if time.Now().After(deadline) {
			return false
		}
		select {
		case <-m.exited:
		case <-time.After(50 * time.Millisecond):
		}
	}
	return true
}

// removeDir removes the temp dir if LaunchMariaDB made it, and nothing
// else: a state file may name any path.
func (m *MariaDB) removeDir() {
	if filepath.Dir(m.Dir) == filepath.Clean(os.TempDir()) && strings.HasPrefix(filepath.Base(m.Dir), mariadbPrefix) {
		_ = os.RemoveAll(m.Dir)
	}
}

// MariaDBStartState launches a detached MariaDB and records its temp dir
// in the state file, for MariaDBStopState from another process. A state
// file whose server still runs is an error; one whose server is gone (it
// crashed, or the machine restarted) is stale: its temp dir is removed
// and a new server started.
func MariaDBStartState(state string) (*MariaDB, error) {
	if old, err := MariaDBFromState(state); err == nil {
		if old.Running() {
			return nil, fmt.Errorf("already running (pid %d, state %s); stop it first", old.PID, state)
		}
		old.removeDir()
		_ = os.Remove(state)
	} else if !errors.Is(err, os.ErrNotExist) {
		// Unreadable: nothing in it can be trusted to remove.
		_ = os.Remove(state)
	}
	m, err := LaunchMariaDB(true)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(state, []byte(m.Dir+"\n"), 0o644); err != nil {
		_, _ = m.Stop()
		return nil, err
	}
	return m, nil
}

// MariaDBFromState is the MariaDB the state file names; os.ErrNotExist
// (wrapped) when there is none.
func MariaDBFromState(state string) (*MariaDB, error) {
	b, err := os.ReadFile(state)
	if err != nil {
		return nil, err
	}
	dir := strings.TrimSpace(string(b))
	if dir == "" {
		return nil, fmt.Errorf("state %s: empty: %w", state, os.ErrNotExist)
	}
	m := &MariaDB{Dir: dir}
	b, err = os.ReadFile(filepath.Join(dir, mariadbInfo))
	if err != nil {
		// The server never became ready, or its dir is gone: nothing
		// runs that we can name, but the dir may still be there.
		return m, nil
	}
	if err := json.Unmarshal(b, m); err != nil {
		return m, nil
	}
	m.Dir = dir
	return m, nil
}

// MariaDBStopState stops the server the state file names (by its PID,
// only if it is still ours) and removes its temp dir and the state file.
// No state file: nothing to do.
func MariaDBStopState(state string) (m *MariaDB, running bool, err error) {
	m, err = MariaDBFromState(state)
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	running, err = m.Stop()
	if err != nil {
		return m, running, err
	}
	return m, running, os.Remove(state)
}

// MySQLDatabase creates the database name on the server base (a DSN up
// to and including "/"), dropping one of that name first, and returns its
// DSN.
func MySQLDatabase(base, name string) (string, error) {
	admin, err := sql.Open("mysql", base)
	if err != nil {
		return "", fmt.Errorf("open %s: %w", base, err)
	}
	defer admin.Close()
	for _, q := range []string{"DROP DATABASE IF EXISTS " + name, "CREATE DATABASE " + name} {
		if _, err := admin.Exec(q); err != nil {
			return "", fmt.Errorf("%s on %s: %w", q, base, err)
		}
	}
	return base + name + "?parseTime=true&multiStatements=false", nil
}

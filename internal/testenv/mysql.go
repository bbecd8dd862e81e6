package testenv

import (
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql" // driver for the test databases
)

// MySQLDSNEnv names a server DSN without database (e.g.
// "root@tcp(127.0.0.1:3306)/") that tests use instead of starting their own
// MariaDB. make test sets it to the server it starts once for all packages.
const MySQLDSNEnv = "SECKILL_TEST_MYSQL_DSN"

var (
	mysqlOnce sync.Once
	mysqlBase string // DSN up to and including "/"
	mysqlErr  error
	mysqlSeq  atomic.Int64
)

// MySQL returns the DSN of a new, empty database on a real MariaDB/MySQL
// server: the one named by $SECKILL_TEST_MYSQL_DSN, or a mariadbd this test
// binary starts on a free port (stopped by Main). The database is dropped
// when the test ends.
func MySQL(t testing.TB) string {
	t.Helper()
	mysqlOnce.Do(func() {
		if dsn := os.Getenv(MySQLDSNEnv); dsn != "" {
			if !strings.HasSuffix(dsn, "/") {
				dsn += "/"
			}
			mysqlBase = dsn
			return
		}
		mysqlBase, mysqlErr = startMariaDB()
	})
	if mysqlErr != nil {
		t.Fatalf("MariaDB: %v", mysqlErr)
	}
	name := fmt.Sprintf("t%d_%d", os.Getpid(), mysqlSeq.Add(1))
	admin, err := sql.Open("mysql", mysqlBase)
	if err != nil {
		t.Fatalf("open %s: %v", mysqlBase, err)
	}
	defer admin.Close()
	if _, err := admin.Exec("CREATE DATABASE " + name); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		a, err := sql.Open("mysql", mysqlBase)
		if err == nil {
			_, _ = a.Exec("DROP DATABASE IF EXISTS " + name)
			a.Close()
		}
	})
	return mysqlBase + name + "?parseTime=true&multiStatements=false"
}

// startMariaDB initialises a data directory and runs mariadbd on a free
// port with grant tables off (a throwaway test server on loopback only).
func startMariaDB() (string, error) {
	bin, err := lookBinary("mariadbd", "mysqld")
	if err != nil {
		return "", fmt.Errorf("mariadbd is required by the tests (apt-get install -y mariadb-server, or make test): %w", err)
	}
	install, err := lookBinary("mariadb-install-db", "mysql_install_db")
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "seckill-mariadb-")
	if err != nil {
		return "", err
	}
	data := filepath.Join(dir, "data")
	out, err := exec.Command(install, "--no-defaults", "--datadir="+data, "--user=root",
		"--auth-root-authentication-method=normal", "--skip-test-db").CombinedOutput()
	if err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("%s: %v\n%s", install, err, out)
	}
	port, err := freePort()
	if err != nil {
		return "", err
	}
	cmd := exec.Command(bin, "--no-defaults", "--datadir="+data, "--user=root",
		"--port="+itoa(port), "--bind-address=127.0.0.1", "--socket="+filepath.Join(dir, "sock"),
		"--skip-grant-tables", "--skip-name-resolve", "--innodb-flush-log-at-trx-commit=2",
		"--log-error="+filepath.Join(dir, "error.log"), "--pid-file="+filepath.Join(dir, "pid"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("start mariadbd: %w", err)
	}
	onStopShared(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		os.RemoveAll(dir)
	})
	base := fmt.Sprintf("root@tcp(127.0.0.1:%d)/", port)
	deadline := time.Now().Add(60 * time.Second)
	for {
		db, err := sql.Open("mysql", base)
		if err == nil {
			err = db.Ping()
			db.Close()
		}
		if err == nil {
			return base, nil
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			return "", fmt.Errorf("mariadbd did not come up: %v\n%s", err, log)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

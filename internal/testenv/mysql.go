package testenv

import (
	"database/sql"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
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
// server: the one named by $SECKILL_TEST_MYSQL_DSN, or a MariaDB this test
// binary launches (LaunchMariaDB, attached; stopped by Main). The database
// is dropped when the test ends.
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
		m, err := LaunchMariaDB(false)
		if err != nil {
			mysqlErr = err
			return
		}
		onStopShared(func() { _, _ = m.Stop() })
		mysqlBase = m.DSN
	})
	if mysqlErr != nil {
		t.Fatalf("MariaDB: %v", mysqlErr)
	}
	name := fmt.Sprintf("t%d_%d", os.Getpid(), mysqlSeq.Add(1))
	dsn, err := MySQLDatabase(mysqlBase, name)
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() {
		a, err := sql.Open("mysql", mysqlBase)
		if err == nil {
			_, _ = a.Exec("DROP DATABASE IF EXISTS " + name)
			a.Close()
		}
	})
	return dsn
}

package benchkit

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"seckill/cmd/seckill/devserver"
	"seckill/internal/testenv"
)

// StartRedis runs a redis-server named name (its log: out/name.log) with
// its files in dir, with seckill dev's persistence settings exactly
// (devserver.Persistence: the append-only file, fsync every second, its
// rewrite policy, no RDB snapshots), by testenv's one starter; StopAll
// stops it (SIGTERM: the file is written out). A reference's Redis and
// the system's then pay for the same durability.
func StartRedis(out, name, dir string) (*Proc, string, error) {
	_ = os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, "", err
	}
	logPath := filepath.Join(out, name+".log")
	r, err := testenv.LaunchRedis(dir, testenv.WithRedisLog(logPath),
		testenv.WithRedisArgs(devserver.Persistence()...))
	if err != nil {
		return nil, "", err
	}
	r.Proc().Name = name
	p := &Proc{Proc: r.Proc()}
	track(p)
	return p, r.Addr, nil
}

// MariaDB is a throwaway MariaDB, testenv's one starter's (it dies with
// the harness too); DSN ends in "/" (append a database name). StopAll
// stops it too.
type MariaDB struct {
	DSN     string
	m       *testenv.MariaDB
	stopped sync.Once
}

// marias are the MariaDBs started, for StopAll.
var marias []*MariaDB

// StartMariaDB starts one.
func StartMariaDB() (*MariaDB, error) {
	tm, err := testenv.LaunchMariaDB(false)
	if err != nil {
		return nil, err
	}
	m := &MariaDB{DSN: tm.DSN, m: tm}
	procsMu.Lock()
	marias = append(marias, m)
	procsMu.Unlock()
	return m, nil
}

// Stop stops it by its PID and removes its files.
func (m *MariaDB) Stop() {
	m.stopped.Do(func() {
		if _, err := m.m.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "benchkit: %v\n", err)
		}
	})
}

package benchkit

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"seckill/internal/testenv"
)

// StartRedis runs a redis-server named name (its log: out/name.log) with
// its files in dir, with seckill dev's persistence settings (the
// append-only file, fsync every second), by testenv's one starter; StopAll
// stops it (SIGTERM: the file is written out).
func StartRedis(out, name, dir string) (*Proc, string, error) {
	_ = os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, "", err
	}
	logPath := filepath.Join(out, name+".log")
	r, err := testenv.LaunchRedis(dir, testenv.WithRedisLog(logPath),
		testenv.WithRedisArgs("--appendonly", "yes", "--appendfsync", "everysec"))
	if err != nil {
		return nil, "", err
	}
	r.Proc().Name = name
	p := &Proc{Proc: r.Proc()}
	track(p)
	return p, r.Addr, nil
}

// MariaDB is the MariaDB scripts/mariadb-test.sh starts (and stops by
// PID); DSN ends in "/" (append a database name). StopAll stops it too.
type MariaDB struct {
	script, state string
	DSN           string
	stopped       sync.Once
}

// marias are the MariaDBs started, for StopAll.
var marias []*MariaDB

// StartMariaDB starts it with root the repository and its state in out.
func StartMariaDB(root, out string) (*MariaDB, error) {
	m := &MariaDB{script: filepath.Join(root, "scripts", "mariadb-test.sh"), state: filepath.Join(out, "mariadb.state")}
	cmd := exec.Command(m.script, "start")
	cmd.Env = append(os.Environ(), "SECKILL_MARIADB_STATE="+m.state)
	cmd.Stderr = os.Stderr
	b, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("scripts/mariadb-test.sh start: %w", err)
	}
	m.DSN = strings.TrimSpace(string(b))
	procsMu.Lock()
	marias = append(marias, m)
	procsMu.Unlock()
	return m, nil
}

// Stop stops it.
func (m *MariaDB) Stop() {
	m.stopped.Do(func() {
		cmd := exec.Command(m.script, "stop")
		cmd.Env = append(os.Environ(), "SECKILL_MARIADB_STATE="+m.state)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		_ = cmd.Run()
	})
}

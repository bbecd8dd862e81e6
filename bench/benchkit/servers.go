package benchkit

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// StartRedis runs a redis-server named name (its log: out/name.log) with
// its files in dir, with seckill dev's persistence settings.
func StartRedis(out, name, dir string) (*Proc, string, error) {
	addr := FreeAddr()
	_, port, _ := strings.Cut(addr, ":")
	_ = os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, "", err
	}
	p, err := Start(out, name, "redis-server", nil, "--port", port, "--bind", "127.0.0.1", "--dir", dir,
		"--appendonly", "yes", "--appendfsync", "everysec", "--save", "", "--daemonize", "no", "--protected-mode", "no")
	if err != nil {
		return nil, "", err
	}
	return p, addr, WaitPort(p, addr, 10*time.Second)
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

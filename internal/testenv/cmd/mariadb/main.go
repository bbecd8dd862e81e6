// Command mariadb starts and stops one throwaway MariaDB for a whole run
// of tests (make test, make check, make chaos): testenv.LaunchMariaDB's
// server, detached so that it outlives this command, found again through
// a state file.
//
//	go run ./internal/testenv/cmd/mariadb start   # prints the DSN, root@tcp(127.0.0.1:PORT)/
//	go run ./internal/testenv/cmd/mariadb dsn     # the running server's DSN
//	go run ./internal/testenv/cmd/mariadb stop    # by PID, then removes its temp dir
//
// start prints the DSN on stdout, the only thing it prints there (tests
// read it from $SECKILL_TEST_MYSQL_DSN); a state file whose server still
// runs is an error, a stale one (the server crashed, the machine
// restarted) is cleaned up first. stop signals the recorded PID only while
// it is still that mariadbd. The state file is $SECKILL_MARIADB_STATE, by
// default one per checkout in the temp dir: make gives each run its own,
// so two runs never share or stop each other's server.
package main

import (
	"crypto/md5"
	"fmt"
	"os"
	"path/filepath"

	"seckill/internal/testenv"
)

func main() {
	if len(os.Args) != 2 {
		usage()
	}
	state, err := statePath()
	if err != nil {
		fail("%v", err)
	}
	switch os.Args[1] {
	case "start":
		m, err := testenv.MariaDBStartState(state)
		if err != nil {
			fail("%v", err)
		}
		fmt.Println(m.DSN)
		logf("started pid %d on 127.0.0.1:%d (dir %s, state %s)", m.PID, m.Port, m.Dir, state)
	case "stop":
		m, running, err := testenv.MariaDBStopState(state)
		switch {
		case err != nil:
			fail("%v", err)
		case m == nil:
			logf("nothing to stop (no state file %s)", state)
		case running:
			logf("stopped pid %d", m.PID)
		default:
			logf("pid %d was not our mariadbd any more (it crashed?); removed %s", m.PID, m.Dir)
		}
	case "dsn":
		m, err := testenv.MariaDBFromState(state)
		if err != nil || !m.Running() {
			fail("no running server (state %s)", state)
		}
		fmt.Println(m.DSN)
	default:
		usage()
	}
}

// statePath is $SECKILL_MARIADB_STATE, or one file per checkout: the
// module root's path hashed into the name.
func statePath() (string, error) {
	if s := os.Getenv("SECKILL_MARIADB_STATE"); s != "" {
		return s, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			dir = d
			break
		}
		if filepath.Dir(d) == d {
			break
		}
	}
	h := md5.Sum([]byte(dir))
	return filepath.Join(os.TempDir(), fmt.Sprintf("seckill-mariadb-test-%x.state", h[:6])), nil
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: mariadb start|stop|dsn  (state file: $SECKILL_MARIADB_STATE)")
	os.Exit(2)
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "mariadb: "+format+"\n", args...)
}

func fail(format string, args ...any) {
	logf(format, args...)
	os.Exit(1)
}

package chaos

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"seckill/internal/testenv"
)

// The seckill binary, built once per test binary.
var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

const binDirPrefix = "seckill-chaos-bin-"

// seckillBinary builds ./cmd/seckill the first time it is asked for, with
// -race: every process of the suite runs under the race detector, and a
// race it reports fails the scenario (System.raceReports). It lives in
// $TMPDIR/seckill-chaos-bin-<pid>;
// directories of test binaries that have ended are removed here, the next
// time the suite runs.
func seckillBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		removeStaleBinDirs()
		dir := filepath.Join(os.TempDir(), binDirPrefix+strconv.Itoa(os.Getpid()))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "seckill")
		start := time.Now()
		if buildErr = testenv.BuildSeckill(binPath, true); buildErr != nil {
			return
		}
		fmt.Fprintf(os.Stderr, "chaos: built %s (-race) in %v\n", binPath, time.Since(start).Round(time.Millisecond))
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// removeStaleBinDirs removes our binary directories whose test binary no
// longer runs.
func removeStaleBinDirs() {
	ents, _ := os.ReadDir(os.TempDir())
	for _, e := range ents {
		pid, err := strconv.Atoi(strings.TrimPrefix(e.Name(), binDirPrefix))
		if !e.IsDir() || !strings.HasPrefix(e.Name(), binDirPrefix) || err != nil || pid == os.Getpid() {
			continue
		}
		if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid))); errors.Is(err, os.ErrNotExist) {
			os.RemoveAll(filepath.Join(os.TempDir(), e.Name()))
		}
	}
}

// proc is one seckill process (or any command) that the harness starts,
// signals and starts again with the same arguments: a testenv.Proc (its
// output in a log file that survives restarts, each start marked; Count
// greps it for race reports and rebuilds; Await gives up when the process
// exits), killed when the test ends.
type proc struct {
	*testenv.Proc
}

func newProc(t testing.TB, dir, name, bin string, args, env []string) *proc {
	p := &proc{Proc: &testenv.Proc{Name: name, Bin: bin, Args: args, Env: env, Log: filepath.Join(dir, name+".log")}}
	t.Cleanup(func() { p.kill(syscall.SIGKILL) })
	return p
}

// kill sends sig to the process (by its PID) and waits for it to exit; a
// process that ignores a gentle signal for 30s is killed.
func (p *proc) kill(sig syscall.Signal) { p.Stop(sig, 30*time.Second) }

// errNotYet is what an Await condition answers while it does not hold yet.
var errNotYet = errors.New("not yet")

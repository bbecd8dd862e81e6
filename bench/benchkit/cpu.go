package benchkit

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"seckill/internal/testenv"
)

// clockTick is the unit of /proc/PID/stat times (getconf CLK_TCK; 100 on
// Linux almost everywhere).
var clockTick = func() time.Duration {
	if b, err := exec.Command("getconf", "CLK_TCK").Output(); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && n > 0 {
			return time.Second / time.Duration(n)
		}
	}
	return 10 * time.Millisecond
}()

// ProcCPU is the CPU time pid and its reaped children used so far.
func ProcCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces; the fields after its
	// closing parenthesis start at field 3 (state).
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 15 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	var ticks int64
	for _, k := range f[11:15] { // utime, stime, cutime, cstime: fields 14-17
		n, err := strconv.ParseInt(k, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * clockTick, nil
}

// RedisInfo reads one INFO section from the redis-server at addr
// (testenv.RedisInfo: a bare connection, no client handshake).
func RedisInfo(addr, section string) (string, error) { return testenv.RedisInfo(addr, section) }

// RedisPID is the process id of the redis-server at addr (INFO server).
func RedisPID(addr string) (int, error) { return testenv.RedisPID(addr) }

// LoadAvg is the machine's load average over 1, 5 and 15 minutes
// ("2.10 1.85 1.40"; "?" where /proc cannot tell), for the head of a
// report: every figure depends on it.
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

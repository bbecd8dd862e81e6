package benchkit

import (
	"os"
	"syscall"
	"testing"
	"time"

	"seckill/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestProcCPUCountsThisProcessWork: /proc/PID/stat parsed right: a busy
// loop that the kernel's own account (getrusage) says took at least 300ms
// of CPU shows as about that much. The loop runs until getrusage says so,
// so a loaded machine makes it longer, not the test wrong.
func TestProcCPUCountsThisProcessWork(t *testing.T) {
	before, err := ProcCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	r0 := rusageCPU(t)
	x := 0
	for deadline := time.Now().Add(time.Minute); rusageCPU(t)-r0 < 300*time.Millisecond; {
		if time.Now().After(deadline) {
			t.Fatal("the busy loop got less than 300ms of CPU in a minute")
		}
		for i := range 100000 {
			x += i
		}
	}
	used := rusageCPU(t) - r0
	after, err := ProcCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// Ticks are 10ms; other goroutines of the test binary add a little.
	if d := after - before; d < used-50*time.Millisecond || d > used+time.Second {
		t.Fatalf("ProcCPU over a busy loop of %v CPU: %v (x %d)", used, d, x)
	}
	if _, err := ProcCPU(1 << 30); err == nil {
		t.Fatal("a process that does not exist must be an error")
	}
}

// rusageCPU is the process's user + system CPU by getrusage.
func rusageCPU(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

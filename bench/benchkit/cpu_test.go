package benchkit

import (
	"os"
	"testing"
	"time"

	"seckill/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestProcCPUCountsThisProcessWork: /proc/PID/stat parsed right, a busy
// loop of ~300ms shows as about that much CPU.
func TestProcCPUCountsThisProcessWork(t *testing.T) {
	before, err := ProcCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	x := 0
	for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); {
		for i := range 1000 {
			x += i
		}
	}
	after, err := ProcCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// A loaded machine may give the loop less than its wall time, never
	// (much) more; ticks are 10ms.
	if d := after - before; d < 50*time.Millisecond || d > 5*time.Second {
		t.Fatalf("CPU over a 300ms busy loop: %v (x %d)", d, x)
	}
	if _, err := ProcCPU(1 << 30); err == nil {
		t.Fatal("a process that does not exist must be an error")
	}
}

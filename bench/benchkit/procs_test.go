package benchkit

import (
	"strings"
	"testing"
	"time"
)

// A tool's children: WaitPort gives up when the child exits, StopWithin
// ends a running child by its PID and forgets it.
func TestProcsStartWaitStop(t *testing.T) {
	dir := t.TempDir()
	quitter, err := Start(dir, "quitter", "/bin/sh", nil, "-c", "echo no port here; exit 2")
	if err != nil {
		t.Fatal(err)
	}
	err = WaitPort(quitter, FreeAddr(), 10*time.Second)
	if err == nil || !strings.Contains(err.Error(), "quitter exited") || !strings.Contains(err.Error(), "no port here") {
		t.Fatalf("WaitPort on a child that exits: %v", err)
	}
	quitter.StopWithin(time.Second)

	sleeper, err := Start(dir, "sleeper", "/bin/sh", []string{"NAP=30"}, "-c", "exec sleep $NAP")
	if err != nil {
		t.Fatal(err)
	}
	if sleeper.PID() == 0 || !sleeper.Running() {
		t.Fatalf("sleeper: pid %d, running %v", sleeper.PID(), sleeper.Running())
	}
	begin := time.Now()
	sleeper.StopWithin(10 * time.Second)
	if sleeper.Running() || time.Since(begin) > 5*time.Second {
		t.Fatalf("sleeper still running %v after stop (%v)", sleeper.Running(), time.Since(begin))
	}
	procsMu.Lock()
	left := len(procs)
	procsMu.Unlock()
	if left != 0 {
		t.Fatalf("%d children still listed after stop", left)
	}
}

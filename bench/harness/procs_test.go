package main

import (
	"strings"
	"testing"
	"time"
)

// The harness's children: waitPort gives up when the child exits, stop
// ends a running child by its PID and forgets it.
func TestProcsStartWaitStop(t *testing.T) {
	dir := t.TempDir()
	quitter, err := start(dir, "quitter", "/bin/sh", nil, "-c", "echo no port here; exit 2")
	if err != nil {
		t.Fatal(err)
	}
	err = waitPort(quitter, freeAddr(), 10*time.Second)
	if err == nil || !strings.Contains(err.Error(), "quitter exited") || !strings.Contains(err.Error(), "no port here") {
		t.Fatalf("waitPort on a child that exits: %v", err)
	}
	quitter.stop(time.Second)

	sleeper, err := start(dir, "sleeper", "/bin/sh", []string{"NAP=30"}, "-c", "exec sleep $NAP")
	if err != nil {
		t.Fatal(err)
	}
	if sleeper.pid() == 0 || !sleeper.Running() {
		t.Fatalf("sleeper: pid %d, running %v", sleeper.pid(), sleeper.Running())
	}
	begin := time.Now()
	sleeper.stop(10 * time.Second)
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

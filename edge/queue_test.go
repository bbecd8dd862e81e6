package edge

import (
	"testing"
	"time"

	"seckill/catalog"
)

// TestWaitingPositionAndETA: a ticket's position is its offset less what
// its partition has drained (itself included, never below 0), its ETA the
// position at the measured drain rate (unknown before a rate), and the
// poll interval half the ETA within the activity's and 30 s; a code of
// another form has no position.
func TestWaitingPositionAndETA(t *testing.T) {
	v, err := newViews(catalog.New(nil), nil, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{line: &line{}, views: v}
	s.cfg.Degrade.PollAfter = time.Second
	if pos, eta, ok := s.WaitPosition("0:99"); !ok || pos != 100 || eta != -1 {
		t.Fatalf("nothing drained: %d %v %v, want 100, unknown", pos, eta, ok)
	}
	s.line.drained.Store(&map[int32]drained{0: {next: 90, perSec: 5}, 1: {next: 500, perSec: 100}})
	for _, c := range []struct {
		code string
		pos  int64
		eta  time.Duration
		poll time.Duration
	}{
		{"0:99", 10, 2 * time.Second, time.Second},
		{"0:1089", 1000, 200 * time.Second, 30 * time.Second},
		{"0:159", 70, 14 * time.Second, 7 * time.Second},
		{"1:20", 0, 0, time.Second}, // drained already
	} {
		pos, eta, ok := s.WaitPosition(c.code)
		if !ok || pos != c.pos || eta != c.eta {
			t.Errorf("%s: %d %v %v, want %d %v", c.code, pos, eta, ok, c.pos, c.eta)
		}
		if poll := s.waitPoll(0, eta); poll != c.poll {
			t.Errorf("%s: poll %v, want %v", c.code, poll, c.poll)
		}
	}
	for _, bad := range []string{"", "0", "x:1", "0:x", "-1:5", "0:-5", "99999999999:1"} {
		if _, _, ok := s.WaitPosition(bad); ok {
			t.Errorf("%q read as a position", bad)
		}
	}
	if _, _, ok := (&Server{}).WaitPosition("0:1"); ok {
		t.Error("an edge without queue mode told a position")
	}
}

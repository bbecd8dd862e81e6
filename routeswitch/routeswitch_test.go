package routeswitch

import (
	"context"
	"testing"

	"seckill/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func TestStateOpensAndClosesEachRoute(t *testing.T) {
	var s State
	for i := range Names {
		if !s.Open(i) {
			t.Fatalf("route %d closed in the zero state", i)
		}
	}
	s = s.With(Index(Pay), false)
	if s.Open(Index(Pay)) || !s.Open(Index(Orders)) || !s.Open(Index(Events)) {
		t.Fatalf("closing pay: %v", s)
	}
	if got := FromMap(s.Map()); got != s {
		t.Fatalf("map round trip %v, want %v", got, s)
	}
	if s.With(Index(Pay), true) != 0 {
		t.Fatal("reopening pay did not give the zero state")
	}
	if Index("checkout") != -1 {
		t.Fatal("an unknown route has an index")
	}
	if got := FromMap(map[string]bool{"checkout": false, "orders": false}); got != 1<<Index(Orders) {
		t.Fatalf("unknown names are not skipped: %v", got)
	}
}

// TestPutLoadAndRestore: Put writes every switch, Load reads them back
// (and reports an absent hash), a value other than "0" reads as open, and
// Restore writes only when Redis holds none.
func TestPutLoadAndRestore(t *testing.T) {
	r := testenv.StartRedis(t)
	rdb := r.Client(t)
	ctx := context.Background()
	if s, found, err := Load(ctx, rdb); err != nil || found || s != 0 {
		t.Fatalf("empty Redis: %v %v %v", s, found, err)
	}
	closed := State(0).With(Index(Events), false)
	if err := Put(ctx, rdb, closed); err != nil {
		t.Fatal(err)
	}
	if s, found, err := Load(ctx, rdb); err != nil || !found || s != closed {
		t.Fatalf("after Put: %v %v %v", s, found, err)
	}
	if err := r.Do(t, "HSET", Key, "orders", "garbage").Error(); err != nil {
		t.Fatal(err)
	}
	if s, _, err := Load(ctx, rdb); err != nil || !s.Open(Index(Orders)) {
		t.Fatalf("a value other than 0: %v %v", s, err)
	}
	saved := func(context.Context) (map[string]bool, error) { return map[string]bool{Pay: false}, nil }
	if done, err := Restore(ctx, rdb, saved); err != nil || done {
		t.Fatalf("restore over existing switches: %v %v", done, err)
	}
	if err := r.Do(t, "DEL", Key).Error(); err != nil {
		t.Fatal(err)
	}
	if done, err := Restore(ctx, rdb, saved); err != nil || !done {
		t.Fatalf("restore into an empty Redis: %v %v", done, err)
	}
	if s, _, err := Load(ctx, rdb); err != nil || s != State(0).With(Index(Pay), false) {
		t.Fatalf("after the restore: %v %v", s, err)
	}
}

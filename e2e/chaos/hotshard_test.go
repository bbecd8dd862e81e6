package chaos

import (
	"fmt"
	"testing"
	"time"
)

// TestHotShardKilled: only the hot-SKU redis-server is SIGKILLed mid-sale
// and comes back empty (no persistence). The shards are meant to isolate
// each other: the normal SKU on the default Redis keeps selling through the
// outage, the hot SKU answers busy (never "unknown" or "not open": the sale
// is on, its ledger is away) until the engine has rebuilt it from the
// database, and nothing is resold.
func TestHotShardKilled(t *testing.T) {
	long(t)
	sc := newScenario(t, Options{RedisPersist: false})
	load, _ := crowd()
	// Enough normal stock that the normal SKU is still on sale while the
	// hot shard is down.
	skus := map[int64]int64{skuNormal: 3000, skuHot: 1500}
	sc.open(skus)
	s := sc.s
	var down, up time.Time
	run, _ := s.buyWithFault(load, faultPlan{
		Name: "SIGKILL the hot-SKU redis-server only (no persistence: it restarts empty)", At: 3 * time.Second,
		Inject: func() error { down = time.Now(); s.Hot.Stop(); return nil },
		HealAt: 5 * time.Second,
		Heal:   func() error { err := s.Hot.Start(); up = time.Now(); return err },
	})
	var normalDuring, hotDuring, hotLater int
	wrong := map[string]int{}
	for _, a := range run.Attempts {
		answered := a.Sent.Add(a.Took)
		inOutage := a.Sent.After(down) && answered.Before(up)
		switch {
		case a.SKU == skuNormal && inOutage && a.Status == 200:
			normalDuring++
		case a.SKU == skuHot && inOutage && a.Status == 200:
			hotDuring++
		case a.SKU == skuHot && a.Sent.After(up) && a.Status == 200:
			hotLater++
		}
		if a.SKU == skuHot && (a.Status == 404 || a.Status == 425) {
			wrong[fmt.Sprintf("%d %s", a.Status, a.Code)]++
		}
	}
	t.Logf("while the hot shard was down (%v): normal SKU accepted %d, hot SKU accepted %d; hot SKU accepted %d after it came back",
		up.Sub(down).Round(time.Millisecond), normalDuring, hotDuring, hotLater)
	s.expect("the normal SKU kept selling while the hot shard was down", normalDuring > 0,
		"normal SKU accepted %d while the hot shard was down", normalDuring)
	s.expect("the hot SKU sold nothing while its shard was down", hotDuring == 0,
		"hot SKU accepted %d while its shard was down", hotDuring)
	s.expect("the hot SKU sold again after its shard came back (rebuilt from the database)", hotLater > 0,
		"hot SKU accepted %d after its shard came back", hotLater)
	s.expect("the hot SKU answered busy, not unknown or not open, while its ledger was away", len(wrong) == 0,
		"hot SKU answers %v", wrong)
	sc.finish(run)
}

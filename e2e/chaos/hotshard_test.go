package chaos

import (
	"testing"
	"time"
)

// TestHotShardKilled: only the hot-SKU redis-server is SIGKILLed mid-sale
// and comes back empty (no persistence): a declared loss of the hot SKU's
// ledger only, with its tickets' results (they live on its shard; the
// database tells their fate). The shards are meant to isolate each other: the normal SKU
// on the default Redis keeps selling through the outage with healthy
// answers, the hot SKU answers 503 BUSY (never "unknown" or "not open": the
// sale is on, its ledger is away) until the engine has rebuilt it from the
// database, and nothing is resold.
func TestHotShardKilled(t *testing.T) {
	sc := newScenario(t, Options{RedisPersist: false})
	load, _ := crowd()
	// Enough normal stock that the normal SKU is still on sale while the
	// hot shard is down.
	skus := map[int64]int64{skuNormal: 1000, skuHot: 1000}
	sc.open(skus)
	s := sc.s
	var down, up time.Time
	run, _ := s.buyWithFault(load, faultPlan{
		Name: "SIGKILL the hot-SKU redis-server only (no persistence: it restarts empty)", At: 3 * time.Second,
		Inject: func() error { down = time.Now(); s.Hot.Stop(); return nil },
		HealAt: 5 * time.Second,
		Heal:   func() error { err := s.Hot.Start(); up = time.Now(); return err },
		During: healthy, DuringSKU: map[int64]statuses{skuNormal: healthy, skuHot: busy},
		// The watcher rebuilds a SKU once two checks in a row (1s
		// apart) miss it: up to about 2s after the restart.
		Settle: 4 * time.Second,
		Loss:   &redisLoss{SKUs: []int64{skuHot}},
	})
	var normalDuring, hotDuring, hotLater int
	for i := range run.Attempts {
		a := &run.Attempts[i]
		inOutage := a.Sent.After(down) && a.answered().Before(up)
		switch {
		case a.SKU == skuNormal && inOutage && a.Status == 200:
			normalDuring++
		case a.SKU == skuHot && inOutage && a.Status == 200:
			hotDuring++
		case a.SKU == skuHot && run.Fault.phase(a) == phaseAfter && a.Status == 200:
			hotLater++
		}
	}
	t.Logf("while the hot shard was down (%v): normal SKU accepted %d, hot SKU accepted %d; hot SKU accepted %d after it came back and settled",
		up.Sub(down).Round(time.Millisecond), normalDuring, hotDuring, hotLater)
	s.expect("the normal SKU kept selling while the hot shard was down", normalDuring > 0,
		"normal SKU accepted %d while the hot shard was down", normalDuring)
	s.expect("the hot SKU sold nothing while its shard was down", hotDuring == 0,
		"hot SKU accepted %d while its shard was down", hotDuring)
	s.expect("the hot SKU sold again after its shard came back (rebuilt from the database)", hotLater > 0,
		"hot SKU accepted %d after its shard came back", hotLater)
	sc.finish(run)
}

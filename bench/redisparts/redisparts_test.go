// Package redisparts measures where an accepted buyer's Redis CPU goes in
// the occupy script, against seed 001 §9.2's script, on a redis-server of
// its own (no network peer but this process, nothing else running):
//
//	go test ./bench/redisparts -run '^$' -bench . -benchtime 200000x
//
// One iteration is one buyer. The occupy script runs in calls of 64 buyers
// (what group commit sends at -c256) with the dev window on, the seed's one
// EVALSHA per buyer from 64 goroutines (rueidis pipelines them, as the
// reference server's connections do). Variants drop one write of the
// occupy script (the pending journal's entry), to price it, or add one that
// occupy leaves out: a QUEUING field per accepted buyer in the results
// hash (with its EXPIRE; the buyer's record is the QUEUING), or the
// window's count of the attempts that took a ticket. Two variants of
// occupy+consumer (below) price the pending journal (its one ZADD a call)
// and the claimed set (its SADD) in the whole of a buyer's work. Each runs without persistence and with
// seckill dev's (the append-only file and its rewrites, whose forked
// children's CPU is counted), with that file never rewritten, and with
// Redis' own rewrite policy (at 64 MB, then at twice the last image). "occupy+consumer" adds what the consumer
// then does on the shard for each buyer: the claim (claim_batch.lua, 1,024
// tickets a call) and the SUCCESS result (one HSET and EXPIRE a call), so
// that it is all of an accepted buyer's work on its shard. redis-µs/buyer
// is INFO cpu, the children's included, over the run.
package redisparts

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"seckill/bench/refs/seed"
	"seckill/cmd/seckill/devserver"
	"seckill/internal/testenv"
	"seckill/lua"
)

// redisCPU is the server's CPU so far, its reaped children's included.
func redisCPU(b *testing.B, c rueidis.Client) float64 {
	b.Helper()
	s, err := c.Do(context.Background(), c.B().Info().Section("cpu").Build()).ToString()
	if err != nil {
		b.Fatal(err)
	}
	var sum float64
	for _, l := range strings.Split(s, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(l), ":")
		if ok && strings.HasPrefix(k, "used_cpu_") && !strings.Contains(k, "main_thread") {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				b.Fatalf("INFO cpu %q: %v", l, err)
			}
			sum += f
		}
	}
	return sum
}

// withQueuingResults is the occupy script that also writes each accepted
// buyer's QUEUING field into the results hash KEYS[9], and its EXPIRE, as
// it did before the record stood for it.
func withQueuingResults(b *testing.B) string {
	const end = "\nreturn out"
	i := strings.LastIndex(lua.OccupyBatch, end)
	if i < 0 {
		b.Fatalf("occupy_batch.lua does not end with %q: update the variant", end)
	}
	return lua.OccupyBatch[:i] + `
if #set > 0 then
  local res = {}
  for j = 1, #set, 2 do
    res[#res + 1] = set[j + 1]
    res[#res + 1] = 'QUEUING|' .. set[j] .. '||'
  end
  redis.call('HSET', KEYS[9], unpack(res))
  redis.call('EXPIRE', KEYS[9], 172800)
end` + lua.OccupyBatch[i:]
}

// pendingEntry is the occupy script's write of the call's pending-journal
// entry.
const pendingEntry = "redis.call('ZADD', KEYS[7], score, table.concat(pend, ','))"

// without is script src with one command dropped.
func without(b *testing.B, src, call string) string {
	if !strings.Contains(src, call) {
		b.Fatalf("the script has no %q: update the variant", call)
	}
	return strings.Replace(src, call, "", 1)
}

func BenchmarkRedisPerBuyer(b *testing.B) {
	for _, p := range []struct {
		name string
		args []string
	}{{"memory", nil}, {"aof", devserver.Persistence()}, {"aof-no-rewrite", append(devserver.Persistence(), "--auto-aof-rewrite-percentage", "0")},
		{"aof-redis-rewrite", append(devserver.Persistence(), "--auto-aof-rewrite-percentage", "100", "--auto-aof-rewrite-min-size", "64mb")}} {
		b.Run(p.name+"/seed", func(b *testing.B) { runSeed(b, p.args) })
		b.Run(p.name+"/occupy+consumer", func(b *testing.B) { runOccupy(b, p.args, lua.OccupyBatch, lua.ClaimBatch, true) })
		// The pending journal and the claimed set priced in the whole of a
		// buyer's work: occupy without the journal's one ZADD a call, and
		// claim without the set's SADD.
		b.Run(p.name+"/occupy+consumer-no-pending", func(b *testing.B) {
			runOccupy(b, p.args, without(b, lua.OccupyBatch, pendingEntry), lua.ClaimBatch, true)
		})
		b.Run(p.name+"/occupy+consumer-no-claimed-set", func(b *testing.B) {
			runOccupy(b, p.args, lua.OccupyBatch, without(b, lua.ClaimBatch, "redis.call('SADD', KEYS[2], unpack(add))"), true)
		})
		for _, v := range []struct{ name, src string }{
			{"occupy", lua.OccupyBatch},
			{"occupy-with-queuing-results", withQueuingResults(b)},
			{"occupy-no-pending", without(b, lua.OccupyBatch, pendingEntry)},
			// The window's count of the attempts that took a ticket, which
			// occupy does not store: what storing them would cost.
			{"occupy-counting-tickets", without(b, lua.OccupyBatch, "c = c - 1")},
		} {
			b.Run(p.name+"/"+v.name, func(b *testing.B) { runOccupy(b, p.args, v.src, lua.ClaimBatch, false) })
		}
	}
}

func start(b *testing.B, args []string) rueidis.Client {
	b.Helper()
	return testenv.StartRedis(b, testenv.WithRedisArgs(args...)).Client(b)
}

func runSeed(b *testing.B, args []string) {
	c := start(b, args)
	ctx := context.Background()
	for _, cmd := range seed.Preheat(1 << 40) {
		if err := c.Do(ctx, c.B().Arbitrary(cmd...).Build()).Error(); err != nil {
			b.Fatal(err)
		}
	}
	script := rueidis.NewLuaScript(seed.Script)
	keys := []string{seed.Stock, seed.Users, seed.Status}
	const callers = 64
	cpu0 := redisCPU(b, c)
	b.ResetTimer()
	var wg sync.WaitGroup
	for g := range callers {
		wg.Go(func() {
			for u := g; u < b.N; u += callers {
				n, err := script.Exec(ctx, c, keys, []string{strconv.Itoa(u + 1)}).AsInt64()
				if err != nil || n != seed.Occupied {
					b.Errorf("buyer %d: %d %v", u+1, n, err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	report(b, c, cpu0)
}

func runOccupy(b *testing.B, args []string, src, claimSrc string, consume bool) {
	c := start(b, args)
	ctx := context.Background()
	const tag = "{a1:s1}"
	keys := []string{tag + ":meta", tag + ":stock", tag + ":users", tag + ":sold", tag + ":closed",
		tag + ":qty", tag + ":pending", tag + ":rl:1", tag + ":r"} // the last for the variant and the consumer
	if err := c.Do(ctx, c.B().Hset().Key(keys[0]).FieldValue().FieldValue("status", "ONLINE").
		FieldValue("start_ms", "0").FieldValue("end_ms", "99999999999999").FieldValue("limit", "1").Build()).Error(); err != nil {
		b.Fatal(err)
	}
	if err := c.Do(ctx, c.B().Set().Key(keys[1]).Value(strconv.FormatInt(1<<40, 10)).Build()).Error(); err != nil {
		b.Fatal(err)
	}
	script := rueidis.NewLuaScript(src)
	claim := rueidis.NewLuaScript(claimSrc)
	var claims, results []string // the tickets not consumed yet
	consumeAll := func() {
		if len(claims) == 0 {
			return
		}
		out, err := claim.Exec(ctx, c, []string{keys[2], tag + ":claimed"}, claims).AsStrSlice()
		if err != nil || out[len(out)-1] != "CLAIMED" {
			b.Fatalf("claim: %v %v", out[len(out)-1:], err)
		}
		h := c.B().Hset().Key(keys[8]).FieldValue()
		for i := 0; i < len(results); i += 2 {
			h = h.FieldValue(results[i], results[i+1])
		}
		for _, r := range c.DoMulti(ctx, h.Build(), c.B().Expire().Key(keys[8]).Seconds(172800).Build()) {
			if err := r.Error(); err != nil {
				b.Fatal(err)
			}
		}
		claims, results = claims[:0], results[:0]
	}
	const batch = 64
	// The dev window (10 attempts in 10 s); requestNos shaped like the
	// engine's (sale.RequestNos: time, sequence, activity, SKU).
	head := []string{"1", "1", "10", ""}
	argv := make([]string, 0, len(head)+3*batch)
	cpu0 := redisCPU(b, c)
	b.ResetTimer()
	for u := 0; u < b.N; {
		argv = append(argv[:0], head...)
		argv[3] = strconv.FormatInt(time.Now().UnixMilli()+10_000, 10)
		for i := 0; i < batch && u < b.N; i++ {
			u++
			uid, rn := strconv.Itoa(u), "1764650000123-"+strconv.Itoa(u)+"-1-1"
			argv = append(argv, uid, rn, "1")
			if consume {
				claims = append(claims, uid, rn)
				results = append(results, rn, "SUCCESS|"+uid+"|"+"O"+rn+"|")
			}
		}
		out, err := script.Exec(ctx, c, keys, argv).ToArray()
		if err != nil {
			b.Fatal(err)
		}
		if code, err := out[len(out)-3].ToString(); err != nil || code != "OK" {
			b.Fatalf("buyer %d: %q %v", u, code, err)
		}
		if len(claims) >= 2*1024 {
			consumeAll()
		}
	}
	consumeAll()
	b.StopTimer()
	report(b, c, cpu0)
}

// report waits for a rewrite in progress to end (its child's CPU counts)
// and reports the server's CPU per buyer.
func report(b *testing.B, c rueidis.Client, cpu0 float64) {
	b.Helper()
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		s, err := c.Do(context.Background(), c.B().Info().Section("persistence").Build()).ToString()
		if err != nil {
			b.Fatal(err)
		}
		if !strings.Contains(s, "aof_rewrite_in_progress:1") && !strings.Contains(s, "aof_rewrite_scheduled:1") {
			break
		}
	}
	b.ReportMetric((redisCPU(b, c)-cpu0)*1e6/float64(b.N), "redis-µs/buyer")
}

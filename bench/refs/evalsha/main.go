// Command evalsha is the bench harness's Redis reference: fasthttp plus one
// rueidis EVALSHA of an occupy script with one buyer per request
// (auto-pipelined), nothing else — no Kafka. The engine's accept path,
// whose one Redis call per buyer is an occupy script call shared by a
// group-commit batch, is compared with it.
//
// -script picks the script:
//
//   - seed: bench/refs/seed, seed 001 §9.2's script exactly (GET status,
//     SISMEMBER, GET stock, DECR, SADD, EXPIRE; three keys on one Redis):
//     what a user writes first, and the yardstick the accept targets are
//     stated against. It keeps no record a consumer could turn into an
//     order: the cheapest honest occupy, not a durable one.
//
//   - stock (the default): occupy_stock_only.lua, lua/occupy_batch.lua as it
//     was at d9a4ed0, when the first accept targets were set: the stock
//     rules and the record only — no user × SKU window, no QUEUING result.
//     The harness compares with this one, so the targets keep the yardstick
//     they were set against, although the engine's call now does more.
//
//   - current: lua/occupy_batch.lua as the engine runs it (through the
//     ledger, stock.Stock.OccupyWith), with the user ×
//     SKU window of configs/bench.yaml (10 per 10s).
//
//     evalsha -listen 127.0.0.1:18081 -redis 127.0.0.1:6379 -stock 100000000 [-script seed|stock|current]
//
// At start it preheats activity 1 / SKU 1 (ONLINE for a day, limit 1 per
// user) with -stock units (seed: the status and stock keys, an empty user
// set). Buyers come from X-User-Id — the harness's accept.lua sends a
// fresh one on every request; the SKU in the body is not read. Answers: 200
// QUEUING, 409 DUPLICATE, 410 SOLD_OUT (seed: also 403 NOT_OPEN), 503 on a
// Redis error.
package main

import (
	"context"
	_ "embed"
	"flag"
	"log"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
	"github.com/valyala/fasthttp"

	"seckill/bench/refs/seed"
	"seckill/catalog"
	"seckill/internal/shard"
	"seckill/sale"
	"seckill/stock"
)

//go:embed occupy_stock_only.lua
var occupyStockOnly string

func main() {
	listen := flag.String("listen", "127.0.0.1:18081", "listen address (loopback)")
	addr := flag.String("redis", "127.0.0.1:6379", "redis-server")
	units := flag.Int64("stock", 100_000_000, "units to preheat")
	which := flag.String("script", "stock", "seed: seed 001 §9.2's script exactly; stock: the occupy script as of d9a4ed0 (no window, no result); current: lua/occupy_batch.lua with the window and the result")
	flag.Parse()

	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{*addr}, DisableCache: true})
	if err != nil {
		log.Fatal(err)
	}
	k := sale.KeysFor(1, 1)
	now := time.Now().UnixMilli()
	ctx := context.Background()
	for _, c := range []rueidis.Completed{
		rc.B().Del().Key(k.Meta, k.Stock, k.Users, k.Sold, k.Pending).Build(),
		rc.B().Hset().Key(k.Meta).FieldValue().FieldValue("status", "ONLINE").
			FieldValue("start_ms", strconv.FormatInt(now-1000, 10)).
			FieldValue("end_ms", strconv.FormatInt(now+86_400_000, 10)).
			FieldValue("limit", "1").Build(),
		rc.B().Set().Key(k.Stock).Value(strconv.FormatInt(*units, 10)).Build(),
	} {
		if err := rc.Do(ctx, c).Error(); err != nil {
			log.Fatal(err)
		}
	}
	for _, c := range seed.Preheat(*units) {
		if err := rc.Do(ctx, rc.B().Arbitrary(c...).Build()).Error(); err != nil {
			log.Fatal(err)
		}
	}
	var seq atomic.Int64
	ct := []byte("application/json")
	var handler fasthttp.RequestHandler
	switch *which {
	case "seed":
		handler = seedHandler(rc, rueidis.NewLuaScript(seed.Script), &seq, ct)
	case "current":
		set, err := shard.Open(shard.Config{Default: shard.Redis{Addrs: []string{*addr}}})
		if err != nil {
			log.Fatal(err)
		}
		handler = ledgerHandler(stock.New(set, catalog.New(set.Default)), &seq, ct)
	case "stock":
		handler = occupyHandler(rc, rueidis.NewLuaScript(occupyStockOnly), func(user int64, rn string) (keys, argv []string) {
			return []string{k.Meta, k.Stock, k.Users, k.Sold, k.Closed, k.Qty, k.Pending},
				[]string{strconv.FormatInt(user, 10), rn, "1"}
		}, &seq, ct)
	default:
		log.Fatalf("-script %q: seed, stock or current", *which)
	}
	srv := &fasthttp.Server{Name: "evalsha", Handler: handler}
	log.Fatal(srv.ListenAndServe(*listen))
}

// seedHandler runs the seed script once per request for the X-User-Id buyer.
func seedHandler(rc rueidis.Client, script *rueidis.Lua, seq *atomic.Int64, ct []byte) fasthttp.RequestHandler {
	keys := []string{seed.Stock, seed.Users, seed.Status}
	return func(ctx *fasthttp.RequestCtx) {
		user := string(ctx.Request.Header.Peek("X-User-Id"))
		rn := "1-1-" + strconv.FormatInt(seq.Add(1), 10)
		code, err := script.Exec(ctx, rc, keys, []string{user}).AsInt64()
		ctx.SetContentTypeBytes(ct)
		switch {
		case err != nil:
			ctx.SetStatusCode(fasthttp.StatusServiceUnavailable)
			ctx.SetBodyString(`{"code":"BUSY"}`)
		case code == seed.Occupied:
			ctx.SetBodyString(`{"code":"QUEUING","requestNo":"` + rn + `"}`)
		case code == seed.Duplicate:
			ctx.SetStatusCode(fasthttp.StatusConflict)
			ctx.SetBodyString(`{"code":"DUPLICATE"}`)
		case code == seed.SoldOut:
			ctx.SetStatusCode(fasthttp.StatusGone)
			ctx.SetBodyString(`{"code":"SOLD_OUT"}`)
		default:
			ctx.SetStatusCode(fasthttp.StatusForbidden)
			ctx.SetBodyString(`{"code":"NOT_OPEN"}`)
		}
	}
}

// ledgerHandler runs the ledger's occupy (one call of lua/occupy_batch.lua
// through stock.Stock, as the engine sends a batch of one) once per request
// for the X-User-Id buyer, with configs/bench.yaml's user × SKU window.
func ledgerHandler(st *stock.Stock, seq *atomic.Int64, ct []byte) fasthttp.RequestHandler {
	a, sku := &sale.Activity{ID: 1}, &sale.SKU{ID: 1}
	x := stock.Extras{WindowLimit: 10, WindowPeriod: 10 * time.Second}
	return func(ctx *fasthttp.RequestCtx) {
		user, _ := strconv.ParseInt(string(ctx.Request.Header.Peek("X-User-Id")), 10, 64)
		rn := "1-1-" + strconv.FormatInt(seq.Add(1), 10)
		res, err := st.OccupyWith(ctx, a, sku, x, user, rn, 1)
		ctx.SetContentTypeBytes(ct)
		switch {
		case err != nil:
			ctx.SetStatusCode(fasthttp.StatusServiceUnavailable)
			ctx.SetBodyString(`{"code":"BUSY"}`)
		case res.Code == stock.CodeOK:
			ctx.SetBodyString(`{"code":"QUEUING","requestNo":"` + rn + `"}`)
		case res.Code == stock.CodeDuplicate:
			ctx.SetStatusCode(fasthttp.StatusConflict)
			ctx.SetBodyString(`{"code":"DUPLICATE"}`)
		default:
			ctx.SetStatusCode(fasthttp.StatusGone)
			ctx.SetBodyString(`{"code":"SOLD_OUT"}`)
		}
	}
}

// occupyHandler runs an occupy script of the project's shape (args builds
// its KEYS and ARGV) once per request for the X-User-Id buyer.
func occupyHandler(rc rueidis.Client, script *rueidis.Lua, args func(user int64, rn string) (keys, argv []string), seq *atomic.Int64, ct []byte) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		user, _ := strconv.ParseInt(string(ctx.Request.Header.Peek("X-User-Id")), 10, 64)
		rn := "1-1-" + strconv.FormatInt(seq.Add(1), 10)
		keys, argv := args(user, rn)
		vals, err := script.Exec(ctx, rc, keys, argv).ToArray()
		ctx.SetContentTypeBytes(ct)
		if err != nil || len(vals) != 3 {
			ctx.SetStatusCode(fasthttp.StatusServiceUnavailable)
			ctx.SetBodyString(`{"code":"BUSY"}`)
			return
		}
		code, _ := vals[0].ToString()
		switch code {
		case "OK":
			ctx.SetBodyString(`{"code":"QUEUING","requestNo":"` + rn + `"}`)
		case "DUPLICATE":
			ctx.SetStatusCode(fasthttp.StatusConflict)
			ctx.SetBodyString(`{"code":"DUPLICATE"}`)
		default:
			ctx.SetStatusCode(fasthttp.StatusGone)
			ctx.SetBodyString(`{"code":"SOLD_OUT"}`)
		}
	}
}

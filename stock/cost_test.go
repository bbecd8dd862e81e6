package stock

import (
	"context"
	"fmt"
	"testing"
	"time"

	"seckill/internal/testenv"
	"seckill/sale"
)

// TestScriptCallsCostTheDocumentedCommands counts, with INFO commandstats
// on a real redis-server, the Redis commands each ledger call runs: the
// numbers the script headers promise. One buyer through the one occupy
// script costs what the retired single-buyer occupy.lua did (HMGET of
// meta, TIME, a read of the user's record, GET, DECRBY, INCRBY, HSET)
// plus the ZADD of the call's pending entry — no result: the record is its
// QUEUING — and, where the user × SKU window is on, the HMGET of its counts
// (an attempt that takes a ticket is not counted); a batch of many costs
// the same commands as a batch of one. A buyer who holds a ticket or is
// over the window costs the window's HMGET, HSET and PEXPIRE besides what
// it costs without one. A claim of one ticket costs what claim.lua did (a
// read of the record, SADD), and leaves the pending journal alone, as a
// release does. A forced release of 64 claimed tickets costs what the
// release of one does.
func TestScriptCallsCostTheDocumentedCommands(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	a, k := r.preheat(t, activity(1, 11, 200, false))
	c := r.def.Client(t)
	// Load the scripts first: a first call answers NOSCRIPT and runs EVAL.
	if _, err := r.stock.Occupy(ctx, a, k, 1000, "warm", 1); err != nil {
		t.Fatal(err)
	}
	warm := sale.Message{RequestNo: "warm", ActivityID: 1, SKUID: 11, UserID: 1000, Quantity: 1}
	if _, err := r.stock.Claim(ctx, &warm); err != nil {
		t.Fatal(err)
	}
	if _, err := r.stock.Release(ctx, &warm, true); err != nil {
		t.Fatal(err)
	}

	cost := func(f func() error) testenv.Commands {
		t.Helper()
		before := testenv.CommandStats(t, c)
		if err := f(); err != nil {
			t.Fatal(err)
		}
		return testenv.CommandStats(t, c).Since(before)
	}
	// Tickets to release by force: one, and a batch of 64, all claimed.
	var one, many []*sale.Message
	for u := int64(300); u < 365; u++ {
		m := &sale.Message{RequestNo: fmt.Sprint("c-", u), ActivityID: 1, SKUID: 11, UserID: u, Quantity: 1}
		if res, err := r.stock.Occupy(ctx, a, k, u, m.RequestNo, 1); err != nil || res.Code != CodeOK {
			t.Fatal(res, err)
		}
		if u == 300 {
			one = append(one, m)
		} else {
			many = append(many, m)
		}
	}
	if _, err := r.stock.ClaimBatch(ctx, append(one, many...)); err != nil {
		t.Fatal(err)
	}
	released := func(msgs []*sale.Message) func() error {
		return func() error {
			out, err := r.stock.ReleaseBatch(ctx, msgs, true)
			if err == nil && out[len(out)-1] != Released {
				err = fmt.Errorf("%v", out)
			}
			return err
		}
	}
	release := testenv.Commands{"evalsha": 1, "hmget": 2, "smismember": 1, "srem": 1, "hdel": 2, "decrby": 1, "incrby": 1,
		"publish": 1} // "available", once per SKU
	buy := testenv.Commands{"evalsha": 1, "hmget": 2, "time": 1, "get": 1, "decrby": 1, "incrby": 1, "hset": 1, "zadd": 1}
	windowed := Extras{WindowLimit: 1, WindowPeriod: time.Hour}
	// The window: one HMGET of the SKU's window hash per call, however
	// many buyers it counts; buyers who all take a ticket write no count.
	buyWindowed := testenv.Commands{"evalsha": 1, "hmget": 3, "time": 1, "get": 1, "decrby": 1, "incrby": 1, "hset": 1, "zadd": 1}
	batch := func(from int64, x Extras) func() error {
		return func() error {
			var buyers []Buyer
			for u := from; u < from+64; u++ {
				buyers = append(buyers, Buyer{UserID: u, RequestNo: fmt.Sprint("b-", u), Quantity: 1})
			}
			out, err := r.stock.OccupyBatch(ctx, a, k, x, buyers, nil)
			if err == nil && out[63].Code != CodeOK {
				err = fmt.Errorf("%+v", out[63])
			}
			return err
		}
	}
	tests := []struct {
		name string
		call func() error
		want testenv.Commands
	}{
		{"one buyer who buys", func() error {
			res, err := r.stock.Occupy(ctx, a, k, 1, "rn-1", 1)
			if err == nil && res.Code != CodeOK {
				err = fmt.Errorf("%+v", res)
			}
			return err
		}, buy},
		{"one buyer who holds a ticket", func() error {
			res, err := r.stock.Occupy(ctx, a, k, 1, "rn-1b", 1)
			if err == nil && res.Code != CodeDuplicate {
				err = fmt.Errorf("%+v", res)
			}
			return err
		}, testenv.Commands{"evalsha": 1, "hmget": 2, "time": 1}},
		{"a batch of 64 buyers who buy", batch(100, Extras{}), testenv.Commands{"evalsha": 1, "hmget": 2, "time": 1, "get": 1,
			"decrby": 1, "incrby": 1, "hset": 1, "zadd": 1}},
		{"one buyer who buys, the window on", func() error {
			res, err := r.stock.OccupyWith(ctx, a, k, windowed, 2, "rn-2", 1)
			if err == nil && res.Code != CodeOK {
				err = fmt.Errorf("%+v", res)
			}
			return err
		}, buyWindowed},
		{"one buyer who holds a ticket, the window on", func() error {
			res, err := r.stock.OccupyWith(ctx, a, k, windowed, 2, "rn-2b", 1)
			if err == nil && (res.Code != CodeDuplicate || res.Holder != "rn-2") {
				err = fmt.Errorf("%+v", res)
			}
			return err
		}, testenv.Commands{"evalsha": 1, "hmget": 3, "time": 1, "hset": 1, "pexpire": 1}},
		{"one buyer over the window", func() error {
			res, err := r.stock.OccupyWith(ctx, a, k, windowed, 2, "rn-2c", 1)
			if err == nil && (res.Code != CodeRateLimited || res.RetryAfter <= 0 || res.RetryAfter > time.Hour) {
				err = fmt.Errorf("%+v", res)
			}
			return err
		}, testenv.Commands{"evalsha": 1, "time": 1, "hmget": 1, "hset": 1, "pexpire": 1}},
		{"a batch of 64 buyers who buy, the window on", batch(200, windowed), buyWindowed},
		{"a claim of one ticket", func() error {
			_, err := r.stock.Claim(ctx, &sale.Message{RequestNo: "rn-1", ActivityID: 1, SKUID: 11, UserID: 1, Quantity: 1})
			return err
		}, testenv.Commands{"evalsha": 1, "hmget": 1, "sadd": 1}},
		{"a forced release of one claimed ticket", released(one), release},
		{"a forced release of 64 claimed tickets", released(many), release},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := cost(tc.call); fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("commands %v, want %v", got, tc.want)
			}
		})
	}
}

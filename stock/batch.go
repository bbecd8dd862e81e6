package stock

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/rueidis"

	"seckill/internal/sale"
	"seckill/lua"
)

// MaxBatch bounds the buyers of one batch script call (engine.batch.max_size)
// and the tickets of one claim_batch.lua call: 3 ARGV strings per buyer stay
// far below Lua's stack limit for unpack.
const MaxBatch = 1024

var occupyBatchScript = rueidis.NewLuaScript(lua.OccupyBatch)

// Buyer is one buyer of a batched occupy.
type Buyer struct {
	UserID    int64
	RequestNo string
	Quantity  int64
}

// OccupyBatch runs the occupy script (occupy_batch.lua) for buyers of one
// SKU, in order: each buyer's result is the one Occupy would have given it
// called once per buyer in that order. The results are appended to out. An
// error is a Redis failure and holds for every buyer. A remaining stock of
// 0 publishes the sold-out event (once).
func (s *Stock) OccupyBatch(ctx context.Context, a *sale.Activity, sku *sale.SKU, buyers []Buyer, out []OccupyResult) ([]OccupyResult, error) {
	args := AppendBatchArgs(make([]string, 0, 3*len(buyers)), buyers)
	return s.OccupyBatchArgs(ctx, a, sku, BatchKeys(a.ID, sku.ID), buyers, args, out)
}

// BatchKeys returns the KEYS of the occupy script for one SKU.
func BatchKeys(activity, sku int64) []string {
	k := sale.KeysFor(activity, sku)
	return []string{k.Meta, k.Stock, k.Users, k.Sold, k.Closed, k.Qty, k.Pending}
}

// AppendBatchArgs appends the script's ARGV triples of buyers to args.
func AppendBatchArgs(args []string, buyers []Buyer) []string {
	for _, b := range buyers {
		args = append(args, strconv.FormatInt(b.UserID, 10), b.RequestNo, strconv.FormatInt(b.Quantity, 10))
	}
	return args
}

// OccupyBatchArgs is OccupyBatch with the SKU's keys (BatchKeys) and the
// buyers' ARGV (AppendBatchArgs) given, so a caller that sends batch after
// batch of one SKU (the engine's group commit) builds neither per call.
func (s *Stock) OccupyBatchArgs(ctx context.Context, a *sale.Activity, sku *sale.SKU, keys []string, buyers []Buyer, args []string, out []OccupyResult) ([]OccupyResult, error) {
	if len(buyers) == 0 {
		return out, nil
	}
	vals, acked, err := s.occupyExec(ctx, s.skuClient(a.ID, sku), keys, args)
	if err != nil {
		// With wait_replicas, the script may have run and its WAIT failed:
		// the buyers are busy either way, and what it took the sweeper
		// gives back (as after a timeout).
		return out, fmt.Errorf("occupy sku %d (batch of %d): %w", sku.ID, len(buyers), err)
	}
	if len(vals) != 3*len(buyers) {
		return out, fmt.Errorf("occupy sku %d: batch script answered %d values for %d buyers", sku.ID, len(vals), len(buyers))
	}
	soldOut := false
	for i := range buyers {
		var r OccupyResult
		if r.Code, err = vals[3*i].ToString(); err != nil {
			return out, fmt.Errorf("occupy sku %d: %w", sku.ID, err)
		}
		if r.Remaining, err = vals[3*i+1].AsInt64(); err != nil {
			return out, fmt.Errorf("occupy sku %d: %w", sku.ID, err)
		}
		switch r.Code {
		case CodeOK:
			r.Holder = buyers[i].RequestNo // the script echoes it; skip a copy
		case CodeDuplicate:
			r.Holder, _ = vals[3*i+2].ToString()
		}
		if r.Remaining == 0 && (r.Code == CodeOK || r.Code == CodeSoldOut) {
			soldOut = true
		}
		out = append(out, r)
	}
	if w := s.shards.Wait(); acked >= 0 && acked < int64(w.Replicas) {
		res := out[len(out)-len(buyers):]
		err := fmt.Errorf("%w: occupy sku %d (batch of %d): %d of %d replicas within %v",
			ErrNotReplicated, sku.ID, len(buyers), acked, w.Replicas, w.Timeout)
		if gerr := s.giveBack(ctx, a, sku, buyers, res); gerr != nil {
			err = fmt.Errorf("%w; %w", err, gerr)
		}
		return out[:len(out)-len(buyers)], err
	}
	if soldOut {
		s.publish(ctx, sale.Event{Kind: sale.EventSoldOut, Activity: a.ID, SKU: sku.ID})
	}
	return out, nil
}

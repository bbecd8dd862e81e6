package stock

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/rueidis"

	"seckill/internal/sale"
	"seckill/lua"
)

var claimBatchScript = rueidis.NewLuaScript(lua.ClaimBatch)

// ClaimBatch claims many tickets with one claim_batch.lua call per SKU (at
// most MaxBatch tickets each): a consumer batch of a hot SKU costs its shard
// one HMGET, one SADD and one ZREM (the claimed tickets leave the pending
// index). Each ticket gets the answer it would get claimed alone. held[i] answers msgs[i]; an error is a Redis
// failure and holds for the whole call (claims are idempotent: retry all).
func (s *Stock) ClaimBatch(ctx context.Context, msgs []*sale.Message) (held []bool, err error) {
	held = make([]bool, len(msgs))
	type group struct {
		idx  []int
		args []string
	}
	groups := map[skuKey]*group{}
	var order []skuKey
	for i, m := range msgs {
		k := skuKey{m.ActivityID, m.SKUID}
		g := groups[k]
		if g == nil {
			g = &group{}
			groups[k] = g
			order = append(order, k)
		}
		g.idx = append(g.idx, i)
		g.args = append(g.args, strconv.FormatInt(m.UserID, 10), m.RequestNo)
	}
	for _, k := range order {
		g := groups[k]
		keys := sale.KeysFor(k.activity, k.sku)
		c := s.client(k.activity, k.sku)
		for lo := 0; lo < len(g.idx); lo += MaxBatch {
			hi := min(lo+MaxBatch, len(g.idx))
			codes, err := claimBatchScript.Exec(ctx, c, []string{keys.Users, keys.Claim, keys.Pending}, g.args[2*lo:2*hi]).AsStrSlice()
			if err != nil {
				return held, fmt.Errorf("claim %d tickets of sku %d: %w", hi-lo, k.sku, err)
			}
			if len(codes) != hi-lo {
				return held, fmt.Errorf("claim sku %d: script answered %d codes for %d tickets", k.sku, len(codes), hi-lo)
			}
			for j, code := range codes {
				held[g.idx[lo+j]] = code == "CLAIMED"
			}
		}
	}
	return held, nil
}

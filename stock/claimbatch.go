package stock

import (
	"context"
	"fmt"

	"seckill/lua"
	"seckill/sale"
)

var claimBatchScript = newPipelined(lua.ClaimBatch)

func claimKeys(k sale.SKUKeys) []string { return []string{k.Users, k.Claim} }

// ClaimBatch claims many tickets with one claim_batch.lua call per SKU (at
// most maxBatch tickets each), the calls of one shard in one pipeline: a
// consumer batch costs each shard it touches one round trip, and each SKU
// one HMGET and one SADD, whatever the number of tickets. Each ticket gets the answer it
// would get claimed alone. held[i] answers msgs[i]; an error is a Redis
// failure and holds for the whole call (claims are idempotent: retry all).
func (s *Stock) ClaimBatch(ctx context.Context, msgs []*sale.Message) (held []bool, err error) {
	held = make([]bool, len(msgs))
	for _, sc := range s.ticketCalls(msgs, claimKeys, nil, appendTicket) {
		for j, r := range claimBatchScript.exec(ctx, sc.c, sc.execs) {
			call := sc.calls[j]
			codes, err := r.AsStrSlice()
			if err != nil {
				return held, fmt.Errorf("claim %d tickets of sku %d: %w", len(call.idx), call.sku.sku, err)
			}
			if len(codes) != len(call.idx) {
				return held, fmt.Errorf("claim sku %d: script answered %d codes for %d tickets", call.sku.sku, len(codes), len(call.idx))
			}
			for k, code := range codes {
				held[call.idx[k]] = code == "CLAIMED"
			}
		}
	}
	return held, nil
}

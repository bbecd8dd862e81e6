package reconcile

import (
	"context"
	"fmt"
	"time"

	"seckill/sale"
)

// pingTimeout bounds the PING that tells a shard that is down from a SKU
// whose reads failed for another reason.
const pingTimeout = time.Second

// shardsDown remembers, for one pass, sweep or full comparison, the Redis
// shards found down. Each read of a dead shard takes seconds before it
// gives up (internal/shard's retries), and a shard holds many SKUs (every
// SKU but the hot ones is on redis.default): when judging a SKU fails, its
// shards are PINGed, and one that does not answer is down for the rest of
// the pass — the SKUs on it are skipped at once, so the others, on the
// shards that answer, are reached within the pass's bound. A shard that
// answers its PING is not asked again: the SKU failed for its own reason.
type shardsDown struct {
	r    *Reconciler
	down map[int]error // shard index -> the PING's error
	up   map[int]bool  // answered a PING this pass
}

func (r *Reconciler) newShardsDown() *shardsDown {
	return &shardsDown{r: r, down: map[int]error{}, up: map[int]bool{}}
}

// skip is why k of a is not judged this pass: a shard of one of its
// buckets (b, or every one for sale.NoBucket on a split SKU) was found
// down. nil: judge it.
func (d *shardsDown) skip(a *sale.Activity, k *sale.SKU, b int) error {
	for _, idx := range d.shardsOf(a, k, b) {
		if err, ok := d.down[idx]; ok {
			return fmt.Errorf("skipped: its shard %d did not answer PING earlier in the pass: %w", idx, err)
		}
	}
	return nil
}

// failed PINGs the shards of k (b: as for skip) that judging it met and
// that have not answered one yet this pass.
func (d *shardsDown) failed(ctx context.Context, a *sale.Activity, k *sale.SKU, b int) {
	for _, idx := range d.shardsOf(a, k, b) {
		if _, ok := d.down[idx]; ok || d.up[idx] || ctx.Err() != nil {
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, pingTimeout)
		err := d.r.stock.PingShard(pctx, idx)
		cancel()
		switch {
		case err == nil:
			d.up[idx] = true
		case ctx.Err() == nil:
			d.down[idx] = err
		}
	}
}

// shardsOf lists the shards holding bucket b of k (sale.NoBucket: every
// bucket's, or the SKU's own shard).
func (d *shardsDown) shardsOf(a *sale.Activity, k *sale.SKU, b int) []int {
	if b >= 0 || !k.Split() {
		return []int{d.r.stock.PlaceIn(a.ID, k, b)}
	}
	var out []int
	for _, i := range k.BucketIndexes() {
		out = append(out, d.r.stock.PlaceIn(a.ID, k, i))
	}
	return out
}

package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"testing"
	"time"

	"seckill/sale"
)

// errLookupOnly rolls back the lookup path's attempt of the differential
// test below.
var errLookupOnly = errors.New("rolled back: the lookup path's decisions only")

// TestFreshAttemptDecidesAsTheLookup: over random histories of one store —
// batches of repeated and new tickets on two small SKUs, quantities 1 and 2,
// orders closed in between — every batch of distinct buyers that SaveBatch
// saves (first without the lookup of the buyers' orders) is decided as the
// lookup path decides it, run first in a transaction rolled back.
func TestFreshAttemptDecidesAsTheLookup(t *testing.T) {
	for _, seed := range []int64{1, 2, 3} {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { freshAgainstLookup(t, seed) })
	}
}

func freshAgainstLookup(t *testing.T, seed int64) {
	runTest(t, func(t *testing.T, r runner) {
		ctx := context.Background()
		st := r.open(t)
		s := st.(*sqlStore)
		put(t, st, activity(1, sale.SKU{ID: 10, Stock: 6, LimitPerUser: 2}, sale.SKU{ID: 11, Stock: 4, LimitPerUser: 2}))
		rng := rand.New(rand.NewSource(seed))
		type tk struct{ sku, user, q int64 }
		tks := map[string]tk{}
		for i := range 40 {
			tks[fmt.Sprintf("r%d", i)] = tk{int64(10 + rng.Intn(2)), int64(1 + rng.Intn(5)), int64(1 + rng.Intn(2))}
		}
		compared := 0
		for step := range 300 {
			if rng.Intn(4) == 0 {
				rn := fmt.Sprintf("r%d", rng.Intn(40))
				_, _, _ = st.CloseOrder(ctx, "O"+rn, time.Now().Add(time.Hour))
				continue
			}
			n := 1 + rng.Intn(4)
			var msgs []sale.Message
			for range n {
				rn := fmt.Sprintf("r%d", rng.Intn(40))
				k := tks[rn]
				m := msg(rn, 1, k.sku, k.user)
				m.Quantity = k.q
				msgs = append(msgs, m)
			}
			b := newBatch(msgs)
			var want []Outcome
			if b.distinct {
				err := s.inTx(ctx, func(tx *sql.Tx) error {
					if err := s.saveBatch(ctx, tx, b, false); err != nil {
						return err
					}
					want = slices.Clone(b.out)
					return errLookupOnly
				})
				if !errors.Is(err, errLookupOnly) {
					want = nil // the lookup path fails too (e.g. ErrConflict)
				}
			}
			got, err := st.SaveBatch(ctx, msgs)
			if b.distinct {
				if (want == nil) != (err != nil) {
					t.Fatalf("step %d: lookup path ok=%v, SaveBatch err=%v", step, want != nil, err)
				}
				if want != nil {
					compared++
					for i := range want {
						if want[i] != got[i] {
							t.Fatalf("step %d ticket %d: lookup decides %+v, SaveBatch %+v", step, i, want[i], got[i])
						}
					}
				}
			}
		}
		if compared < 50 {
			t.Fatalf("only %d distinct batches compared", compared)
		}
	})
}

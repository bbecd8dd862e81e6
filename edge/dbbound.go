package edge

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dgraph-io/ristretto/v2"
	"github.com/valyala/fasthttp"

	"seckill/internal/identity"
	"seckill/internal/ratelimit"
	"seckill/stock/results"
)

// ErrDBReadsLimited: the caller has spent its database reads for now
// (DBBound); answered 429 with Retry-After.
var ErrDBReadsLimited = errors.New("database reads for this user limited")

// DBBound bounds what one buyer's well-formed but unknown ids cost the
// orders database: the result route's and the result stream's fallback
// and the pay route read it for any id a buyer names. Each user may
// cause at most edge.db_reads_per_user reads a second (burst ×5) through
// it, and an id the database did not know is remembered for
// edge.db_miss_ttl and answered "not found" without another read. Safe
// for concurrent use.
type DBBound struct {
	lim *ratelimit.Local
	neg *ristretto.Cache[string, struct{}]
	ttl time.Duration
}

// NewDBBound builds the bound from the edge section; nil when
// db_reads_per_user is 0 (no bound).
func NewDBBound(c *Config) (*DBBound, error) {
	if c.DBReadsPerUser <= 0 {
		return nil, nil
	}
	neg, err := ristretto.NewCache(&ristretto.Config[string, struct{}]{
		NumCounters: 1 << 20, MaxCost: 1 << 16, BufferItems: 64, IgnoreInternalCost: true,
	})
	if err != nil {
		return nil, fmt.Errorf("edge db-miss cache: %w", err)
	}
	burst := max(int(c.DBReadsPerUser*5), 1)
	return &DBBound{lim: ratelimit.NewLocal(c.DBReadsPerUser, burst, c.Rate.MaxKeys, nil), neg: neg, ttl: c.DBMissTTL}, nil
}

// Close releases the miss cache.
func (b *DBBound) Close() {
	if b != nil {
		b.neg.Close()
	}
}

// Allow spends one of user's database reads; wait is when the next is
// due when it is refused.
func (b *DBBound) Allow(user int64) (bool, time.Duration) {
	if b == nil {
		return true, 0
	}
	return b.lim.Allow(uint64(user))
}

// Fallback wraps a result fallback: a remembered miss is ErrNotFound at
// once, a user past the bound ErrDBReadsLimited, and a new miss is
// remembered. A nil bound returns f as it is (user ignored).
func (b *DBBound) Fallback(f ResultFallback) func(ctx context.Context, user int64, rn string) (results.Entry, error) {
	return b.fallback(f, true)
}

// FallbackInFlight is Fallback for a ticket Redis holds claimed, whose
// order the consumer may be writing now: a miss is what the database says
// until it commits, so it is neither answered from nor remembered in the
// misses (that would answer the buyer "not there" for edge.db_miss_ttl
// after the order exists). The per-user bound still holds.
func (b *DBBound) FallbackInFlight(f ResultFallback) func(ctx context.Context, user int64, rn string) (results.Entry, error) {
	return b.fallback(f, false)
}

func (b *DBBound) fallback(f ResultFallback, remember bool) func(ctx context.Context, user int64, rn string) (results.Entry, error) {
	return func(ctx context.Context, user int64, rn string) (results.Entry, error) {
		if b == nil {
			return f(ctx, rn)
		}
		if _, miss := b.neg.Get(rn); miss && remember {
			return results.Entry{}, results.ErrNotFound
		}
		if ok, _ := b.lim.Allow(uint64(user)); !ok {
			return results.Entry{}, ErrDBReadsLimited
		}
		e, err := f(ctx, rn)
		if remember && errors.Is(err, results.ErrNotFound) {
			b.neg.SetWithTTL(rn, struct{}{}, 1, b.ttl)
		}
		return e, err
	}
}

// Guard runs v's identity check and the bound in front of h, a route that
// reads the database for an id the caller names (pay): a refused identity
// gets the table's answer, past the bound 429 RATE_LIMITED with
// Retry-After (answers.go), and h is not called.
func (b *DBBound) Guard(v *identity.Verifier, h fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		user, r := v.User(ctx)
		if r != identity.OK {
			ctx.Response.Header.Set("Cache-Control", "no-store")
			IdentityAnswer(r).Write(ctx)
			return
		}
		if ok, wait := b.Allow(user); !ok {
			ctx.Response.Header.Set("Cache-Control", "no-store")
			AnswerReadsLimited.Retry(ctx, wait)
			return
		}
		h(ctx)
	}
}

package edge

import (
	"fmt"
	"hash/maphash"
	"time"

	"github.com/dgraph-io/ristretto/v2"
)

// holders remembers, for edge.holders_ttl, the buyers the engine has told
// hold a ticket for a SKU (QUEUING or DUPLICATE), so that their next
// attempts pass the SKU's shared admission gate without spending it: a few
// accounts hammering a SKU they hold cannot take the gate capacity fresh
// buyers need. The engine still answers each attempt (DUPLICATE, or a
// ticket again once the old one was released), so nothing is answered
// from memory; what bounds a holder's attempts is the per-user limit and
// the SKU's in-flight bound. Bounded (edge.holders_max entries; ristretto
// evicts past it) and short-lived. Safe for concurrent use; held does not
// allocate.
type holders struct {
	cache *ristretto.Cache[uint64, holder] // nil: off (holders_ttl 0)
	ttl   time.Duration
	seed  maphash.Seed
}

// holder is one entry; it carries its whole key, so a hash collision is a
// miss, never another buyer's ticket.
type holder struct {
	activity, sku, user int64
	requestNo           string
}

func (h *holders) open(ttl time.Duration, maxEntries int) error {
	h.ttl, h.seed = ttl, maphash.MakeSeed()
	if ttl <= 0 {
		return nil
	}
	cache, err := ristretto.NewCache(&ristretto.Config[uint64, holder]{
		NumCounters: int64(maxEntries) * 10, MaxCost: int64(maxEntries), BufferItems: 64, IgnoreInternalCost: true,
	})
	if err != nil {
		return fmt.Errorf("edge holders cache: %w", err)
	}
	h.cache = cache
	return nil
}

func (h *holders) close() {
	if h.cache != nil {
		h.cache.Close()
	}
}

func (h *holders) key(activity, sku, user int64) uint64 {
	var b [24]byte
	for i, v := range [3]int64{activity, sku, user} {
		for j := range 8 {
			b[i*8+j] = byte(v >> (8 * j))
		}
	}
	return maphash.Bytes(h.seed, b[:])
}

// held is the requestNo of the ticket user holds for sku in activity, as
// the engine last said within the TTL.
func (h *holders) held(activity, sku, user int64) (string, bool) {
	if h.cache == nil {
		return "", false
	}
	e, ok := h.cache.Get(h.key(activity, sku, user))
	if !ok || e.activity != activity || e.sku != sku || e.user != user || e.requestNo == "" {
		return "", false
	}
	return e.requestNo, true
}

// hold records that user holds requestNo for sku in activity.
func (h *holders) hold(activity, sku, user int64, requestNo string) {
	if h.cache == nil || requestNo == "" {
		return
	}
	h.cache.SetWithTTL(h.key(activity, sku, user), holder{activity, sku, user, requestNo}, 1, h.ttl)
}

package edge

import (
	"context"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"seckill/blocklist"
)

// blocklists is the blocklist in force: the union of edge.blocklist
// (configuration) and the admin API's entries in Redis, held as an
// immutable set behind an atomic pointer, so a lookup takes no lock. It is
// re-read from Redis when a blocklist event arrives, after every
// re-subscription (events may have been missed) and every
// edge.blocklist.refresh_interval. A failed read keeps the last set: an
// outage of Redis neither lifts nor adds a block. Safe for concurrent use.
type blocklists struct {
	cur    atomic.Pointer[blocklist.Set]
	static *blocklist.Set // edge.blocklist
	store  *blocklist.Store
	kick   chan struct{} // asks the loader for a read now
	ips    prometheus.Gauge
	users  prometheus.Gauge
	warn   *rareWarner
}

func newBlocklists(static *blocklist.Set, store *blocklist.Store, m *metrics, warn *rareWarner) *blocklists {
	b := &blocklists{static: static, store: store, kick: make(chan struct{}, 1), ips: m.blockIPs, users: m.blockUsers, warn: warn}
	b.cur.Store(static)
	return b
}

// set returns the blocklist in force. No allocation.
func (b *blocklists) set() *blocklist.Set { return b.cur.Load() }

// load reads the admin API's entries once and installs the union with the
// configured ones.
func (b *blocklists) load(ctx context.Context) error {
	dyn, bad, err := b.store.Load(ctx)
	if err != nil {
		return err
	}
	if len(bad) > 0 {
		b.warn.warn("edge skips unreadable blocklist entries in Redis", errBadEntries(bad))
	}
	set := b.static.Union(dyn)
	b.cur.Store(set)
	b.ips.Set(float64(len(set.IPs())))
	b.users.Set(float64(len(set.Users())))
	return nil
}

// reload asks the loader for a read now; requests coalesce.
func (b *blocklists) reload() {
	select {
	case b.kick <- struct{}{}:
	default:
	}
}

// Package catalog keeps the list of activities and their SKUs: written to
// the default Redis by preheat (the stock ledger) and read by every part that must
// route a SKU (hot shard or not) or judge a request early (the edge). Reads
// come from an in-memory snapshot swapped atomically, so the hot path takes
// no lock; Load refreshes it (periodically and on activity events).
package catalog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"seckill/sale"
)

// Catalog is safe for concurrent use.
type Catalog struct {
	rdb  rueidis.Client
	snap atomic.Pointer[snapshot]
	mu   sync.Mutex    // serialises Load and Put's local update
	gen  atomic.Uint64 // bumped by every Put, so a Load that read Redis before it does not undo it
}

type snapshot struct {
	acts  map[int64]*sale.Activity
	bySKU map[int64][]*sale.Activity // every activity that sells the SKU, by start
	// reserved holds each activity's reserved users as a set, for a
	// lookup per purchase that does not scan the list.
	reserved map[int64]map[int64]struct{}
}

// New returns an empty catalog over the default Redis.
func New(rdb rueidis.Client) *Catalog {
	c := &Catalog{rdb: rdb}
	c.snap.Store(build(nil))
	return c
}

func build(acts []*sale.Activity) *snapshot {
	s := &snapshot{acts: make(map[int64]*sale.Activity, len(acts)), bySKU: map[int64][]*sale.Activity{},
		reserved: map[int64]map[int64]struct{}{}}
	for _, a := range acts {
		s.acts[a.ID] = a
		if len(a.ReservedUsers) > 0 {
			set := make(map[int64]struct{}, len(a.ReservedUsers))
			for _, u := range a.ReservedUsers {
				set[u] = struct{}{}
			}
			s.reserved[a.ID] = set
		}
		for _, k := range a.SKUs {
			s.bySKU[k.ID] = append(s.bySKU[k.ID], a)
		}
	}
	for _, l := range s.bySKU {
		sort.Slice(l, func(i, j int) bool { return l[i].Start.Before(l[j].Start) })
	}
	return s
}

// Put writes a (create or replace) to Redis and to the local snapshot.
func (c *Catalog) Put(ctx context.Context, a sale.Activity) error {
	b, err := json.Marshal(a)
	if err != nil {
		return err
	}
	cmds := rueidis.Commands{
		c.rdb.B().Set().Key(sale.ActivityKey(a.ID)).Value(string(b)).Build(),
		c.rdb.B().Sadd().Key(sale.ActivitiesKey).Member(strconv.FormatInt(a.ID, 10)).Build(),
	}
	for _, r := range c.rdb.DoMulti(ctx, cmds...) {
		if err := r.Error(); err != nil {
			return fmt.Errorf("catalog put activity %d: %w", a.ID, err)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.snap.Load()
	acts := make([]*sale.Activity, 0, len(old.acts)+1)
	for id, x := range old.acts {
		if id != a.ID {
			acts = append(acts, x)
		}
	}
	cp := a
	acts = append(acts, &cp)
	c.snap.Store(build(acts))
	c.gen.Add(1)
	return nil
}

// Remove deletes activity id from Redis and from the local snapshot (an
// ended activity whose keys outlived their retention). Idempotent.
func (c *Catalog) Remove(ctx context.Context, id int64) error {
	cmds := rueidis.Commands{
		c.rdb.B().Srem().Key(sale.ActivitiesKey).Member(strconv.FormatInt(id, 10)).Build(),
		c.rdb.B().Unlink().Key(sale.ActivityKey(id)).Build(),
	}
	for _, r := range c.rdb.DoMulti(ctx, cmds...) {
		if err := r.Error(); err != nil {
			return fmt.Errorf("catalog remove activity %d: %w", id, err)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.snap.Load()
	if _, ok := old.acts[id]; !ok {
		return nil
	}
	acts := make([]*sale.Activity, 0, len(old.acts))
	for x, a := range old.acts {
		if x != id {
			acts = append(acts, a)
		}
	}
	c.snap.Store(build(acts))
	c.gen.Add(1)
	return nil
}

// ErrUnknownActivity is Update's error for an activity the catalog does not
// hold.
var ErrUnknownActivity = errors.New("unknown activity")

// Update changes one activity in place, the way a live switch does (the
// risk policy): it reloads the catalog, applies change to a copy of
// activity id and puts the copy (Put). The caller announces it
// (sale.EventActivity). Updates of one activity from two processes at once
// are not serialised: the last Put wins.
func (c *Catalog) Update(ctx context.Context, id int64, change func(*sale.Activity)) (sale.Activity, error) {
	if err := c.Load(ctx); err != nil {
		return sale.Activity{}, err
	}
	cur, ok := c.Activity(id)
	if !ok {
		return sale.Activity{}, fmt.Errorf("activity %d: %w", id, ErrUnknownActivity)
	}
	a := *cur
	a.SKUs = append([]sale.SKU(nil), cur.SKUs...)
	a.ReservedUsers = append([]int64(nil), cur.ReservedUsers...)
	change(&a)
	if err := c.Put(ctx, a); err != nil {
		return sale.Activity{}, err
	}
	return a, nil
}

// Load refreshes the snapshot from Redis. A Put that lands while Load reads
// Redis wins: Load then reads again (or leaves the fresher snapshot in
// place).
//
// Activities are never removed (Put creates or replaces; nothing deletes),
// so an activity the snapshot holds and Redis does not was lost by Redis —
// a restart without persistence, a FLUSHALL, an eviction — not taken off
// sale: Load keeps it. Its buyers then reach the occupy script, which finds
// no meta and answers busy until the watcher has rebuilt the SKU from the
// database (and put the catalog entry back), instead of being told the SKU
// is unknown. An activity Redis holds replaces the snapshot's copy.
func (c *Catalog) Load(ctx context.Context) error {
	for try := 0; try < 3; try++ {
		gen := c.gen.Load()
		acts, err := c.read(ctx)
		if err != nil {
			return err
		}
		c.mu.Lock()
		if c.gen.Load() == gen {
			old := c.snap.Load()
			seen := make(map[int64]bool, len(acts))
			for _, a := range acts {
				seen[a.ID] = true
			}
			for id, a := range old.acts {
				if !seen[id] {
					acts = append(acts, a)
				}
			}
			c.snap.Store(build(acts))
			c.mu.Unlock()
			return nil
		}
		c.mu.Unlock()
	}
	return nil
}

// Remember adds to the snapshot, in memory only, the activities it does
// not know yet: a process that starts while Redis has lost the catalog
// learns the sale from the database, so its edge answers "busy" until the
// watcher has rebuilt Redis, not "unknown SKU". Activities Redis holds win
// (they carry on-call's latest changes); Redis itself is left to the
// watcher, which sees the loss and rebuilds it.
func (c *Catalog) Remember(acts []sale.Activity) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.snap.Load()
	next := make([]*sale.Activity, 0, len(old.acts)+len(acts))
	for _, a := range old.acts {
		next = append(next, a)
	}
	added := false
	for i := range acts {
		if _, ok := old.acts[acts[i].ID]; !ok {
			cp := acts[i]
			next = append(next, &cp)
			added = true
		}
	}
	if added {
		c.snap.Store(build(next))
		c.gen.Add(1)
	}
}

func (c *Catalog) read(ctx context.Context) ([]*sale.Activity, error) {
	ids, err := c.rdb.Do(ctx, c.rdb.B().Smembers().Key(sale.ActivitiesKey).Build()).AsStrSlice()
	if err != nil {
		return nil, fmt.Errorf("catalog load: %w", err)
	}
	acts := make([]*sale.Activity, 0, len(ids))
	if len(ids) > 0 {
		cmds := make(rueidis.Commands, len(ids))
		for i, id := range ids {
			cmds[i] = c.rdb.B().Get().Key("sk:act:" + id).Build()
		}
		for i, r := range c.rdb.DoMulti(ctx, cmds...) {
			s, err := r.ToString()
			if rueidis.IsRedisNil(err) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("catalog load activity %s: %w", ids[i], err)
			}
			a := new(sale.Activity)
			if err := json.Unmarshal([]byte(s), a); err != nil {
				return nil, fmt.Errorf("catalog load activity %s: %w", ids[i], err)
			}
			acts = append(acts, a)
		}
	}
	return acts, nil
}

// Activity returns the activity with id. The result must not be modified.
func (c *Catalog) Activity(id int64) (*sale.Activity, bool) {
	a, ok := c.snap.Load().acts[id]
	return a, ok
}

// Reserved reports whether user is on activity's reserved list. A map
// lookup on the current snapshot: no lock, no allocation.
func (c *Catalog) Reserved(activity, user int64) bool {
	_, ok := c.snap.Load().reserved[activity][user]
	return ok
}

// Activities returns every activity, by id. The results must not be modified.
func (c *Catalog) Activities() []*sale.Activity {
	s := c.snap.Load()
	out := make([]*sale.Activity, 0, len(s.acts))
	for _, a := range s.acts {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Lookup returns activity id's SKU sku.
func (c *Catalog) Lookup(activity, sku int64) (*sale.Activity, *sale.SKU, bool) {
	a, ok := c.snap.Load().acts[activity]
	if !ok {
		return nil, nil, false
	}
	k := a.SKU(sku)
	return a, k, k != nil
}

// Current resolves the activity that sells sku at now, for requests that do
// not name one: the activity whose window contains now, else the next one to
// start, else the one that ended last.
func (c *Catalog) Current(sku int64, now time.Time) (*sale.Activity, *sale.SKU, bool) {
	l := c.snap.Load().bySKU[sku]
	if len(l) == 0 {
		return nil, nil, false
	}
	var pick *sale.Activity
	for _, a := range l {
		if !now.Before(a.Start) && now.Before(a.End) {
			if a.State != sale.StateOffline || pick == nil {
				pick = a
			}
		}
	}
	if pick == nil {
		for _, a := range l {
			if now.Before(a.Start) {
				pick = a
				break
			}
		}
	}
	if pick == nil {
		pick = l[len(l)-1]
	}
	return pick, pick.SKU(sku), true
}

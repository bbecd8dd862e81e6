// Package results reads and writes ticket results: one field per ticket of
// its SKU's results hash, sk:{a<activity>:s<sku>}:r on the shard that holds
// the SKU (the ticket number names its SKU, sale.ParseRequestNo; the value
// is sale.AppendResultValue's). A ticket the engine accepted has no field
// until it ends: its QUEUING is the user's record (the SKU's users hash,
// userId -> requestNo, which the occupy script writes anyway), so Read and
// ReadMany, told the owner, answer QUEUING where the record names the
// ticket and no final result is written. The consumer writes SUCCESS or
// FAIL when it is done, a compensation FAIL, the line WAITING. A SKU's
// results expire a TTL after its last result was written.
package results

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"seckill/sale"
)

// DefaultTTL is how long a result stays readable (DESIGN §5: 48 h).
const DefaultTTL = 48 * time.Hour

// ErrNotFound means no result exists under that requestNo (or it is not a
// ticket number at all).
var ErrNotFound = errors.New("result not found")

// Entry is one result to write.
type Entry struct {
	RequestNo string `json:"requestNo"`
	Activity  int64  `json:"activity"`
	SKU       int64  `json:"sku"`
	Owner     int64  `json:"owner"`
	State     string `json:"state"` // sale.ResultQueuing, ResultSuccess, ResultFail
	OrderNo   string `json:"orderNo"`
	Code      string `json:"code"` // failure code for FAIL
	// Claimed is set on a QUEUING that Read found claimed by the consumer
	// (its order is being written, or was and its final result is lost:
	// the orders database can tell).
	Claimed bool `json:"-"`
}

// Ordered reports an end only an order gives: SUCCESS with its number, or
// FAIL CLOSED (closed unpaid). What a request log alone says (FAIL RELEASED
// from a FAILED row) may be written before the consumer writes the true end
// to Redis, so a claimed QUEUING takes only an Ordered answer from the
// database.
func (e *Entry) Ordered() bool {
	return e.State == sale.ResultSuccess && e.OrderNo != "" || e.State == sale.ResultFail && e.Code == sale.FailClosed
}

// Router returns the client of the shard that holds bucket b of SKU
// (activity, sku) — sale.NoBucket for a SKU not split —:
// (*stock.Stock).BucketClient. A ticket number names its bucket.
type Router func(activity, sku int64, b int) rueidis.Client

// Store writes and reads results. Safe for concurrent use.
type Store struct {
	def   rueidis.Client // Channel's PUBLISH
	route Router
	ttl   time.Duration
}

// New returns a Store that keeps each result on the shard route names for
// its SKU and publishes on the default Redis def, where every
// web.ResultHub subscribes. A nil route keeps every result on def. ttl <= 0
// means DefaultTTL.
func New(def rueidis.Client, route Router, ttl time.Duration) *Store {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	if route == nil {
		route = func(int64, int64, int) rueidis.Client { return def }
	}
	return &Store{def: def, route: route, ttl: ttl}
}

// TTL is how long a written result stays readable.
func (s *Store) TTL() time.Duration { return s.ttl }

// where is the SKU and bucket an entry's result belongs to: the ones its
// requestNo names, else (a ticket number of another form) the entry's own
// SKU.
func where(e *Entry) (activity, sku int64, b int) {
	if a, k, b, _, ok := sale.ParseTicket(e.RequestNo); ok {
		return a, k, b
	}
	return e.Activity, e.SKU, sale.NoBucket
}

// skuWrite is the results of one SKU (one bucket of it) in one Write: one HSET of all their
// fields and one EXPIRE of the hash.
type skuWrite struct {
	c        rueidis.Client
	activity int64
	sku      int64
	bucket   int
	fv       []string // field, value pairs
}

func (w *skuWrite) cmds(ttl time.Duration, dst rueidis.Commands) rueidis.Commands {
	key := sale.ResultsKeyIn(w.activity, w.sku, w.bucket)
	h := w.c.B().Hset().Key(key).FieldValue()
	for i := 0; i < len(w.fv); i += 2 {
		h = h.FieldValue(w.fv[i], w.fv[i+1])
	}
	return append(dst, h.Build(), w.c.B().Expire().Key(key).Seconds(int64(ttl/time.Second)).Build())
}

// Channel is the pub/sub channel a Write of final results (SUCCESS, FAIL)
// publishes on, on the default Redis: one message per Write, the
// requestNos separated by spaces. The result streams of every edge
// (web.ResultHub, one subscription per process) learn from it that a
// ticket is answered, instead of each stream polling Redis.
const Channel = "sk:results"

// group is the commands of one shard.
type group struct {
	c    rueidis.Client
	cmds rueidis.Commands
	idx  []int // the requestNos' indexes (reads)
}

// groupOf finds or adds c's group; a sale has a handful of shards.
func groupOf(gs []group, c rueidis.Client) ([]group, *group) {
	for i := range gs {
		if gs[i].c == c {
			return gs, &gs[i]
		}
	}
	gs = append(gs, group{c: c})
	return gs, &gs[len(gs)-1]
}

// doGroups sends each shard's commands in one pipelined round trip (DoMulti;
// on a Redis Cluster one per node), the shards in parallel; each call of
// fn sees one shard's answers.
func doGroups(ctx context.Context, gs []group, fn func(g *group, rs []rueidis.RedisResult) error) error {
	if len(gs) == 1 {
		return fn(&gs[0], gs[0].c.DoMulti(ctx, gs[0].cmds...))
	}
	errs := make([]error, len(gs))
	var wg sync.WaitGroup
	for i := range gs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = fn(&gs[i], gs[i].c.DoMulti(ctx, gs[i].cmds...))
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Write stores the results: per SKU one HSET of its tickets' fields and one
// EXPIRE of its results hash, on the shard of the SKU, every shard's in one
// pipelined round trip (the shards in parallel), and where any result is
// final, once they are all written, one PUBLISH on Channel on the default
// Redis naming them all.
func (s *Store) Write(ctx context.Context, es ...Entry) error {
	if len(es) == 0 {
		return nil
	}
	var ws []skuWrite
	var final []byte
	// Every value is built into one buffer and converted once: the fields'
	// values are substrings of it, not a buffer and a string per entry.
	vals := make([]byte, 0, 64*len(es)) // STATE|owner|orderNo|code: ~50 bytes
	ends := make([]int, len(es))
	for i := range es {
		vals = sale.AppendResultValue(vals, es[i].State, es[i].Owner, es[i].OrderNo, es[i].Code)
		ends[i] = len(vals)
	}
	all := string(vals)
	for i := range es {
		a, k, b := where(&es[i])
		var w *skuWrite
		for j := range ws {
			if ws[j].activity == a && ws[j].sku == k && ws[j].bucket == b {
				w = &ws[j]
				break
			}
		}
		if w == nil {
			ws = append(ws, skuWrite{c: s.route(a, k, b), activity: a, sku: k, bucket: b})
			w = &ws[len(ws)-1]
		}
		from := 0
		if i > 0 {
			from = ends[i-1]
		}
		w.fv = append(w.fv, es[i].RequestNo, all[from:ends[i]])
		if es[i].State != sale.ResultQueuing && es[i].State != "" {
			if len(final) > 0 {
				final = append(final, ' ')
			}
			final = append(final, es[i].RequestNo...)
		}
	}
	var gs []group
	for i := range ws {
		var g *group
		gs, g = groupOf(gs, ws[i].c)
		g.cmds = ws[i].cmds(s.ttl, g.cmds)
	}
	var pub rueidis.Completed
	if len(final) > 0 {
		pub = s.def.B().Publish().Channel(Channel).Message(rueidis.BinaryString(final)).Build()
		// Behind the writes on the same connection: one round trip —
		// except on a Redis Cluster, where rueidis refuses (panics on) a
		// DoMulti that mixes a command without a key with keys of several
		// slots: there it goes on its own, after the writes.
		if len(gs) == 1 && gs[0].c == s.def && s.def.Mode() != rueidis.ClientModeCluster {
			gs[0].cmds = append(gs[0].cmds, pub)
			final = nil
		}
	}
	err := doGroups(ctx, gs, func(_ *group, rs []rueidis.RedisResult) error {
		for _, r := range rs {
			if err := r.Error(); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil && len(final) > 0 {
		err = s.def.Do(ctx, pub).Error()
	}
	if err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	return nil
}

// Read returns the result of requestNo as user reads it, from the shard
// its SKU names: the final result (SUCCESS, FAIL) where one is written,
// else QUEUING (owner user) where user's record names the ticket, else
// the field as written (WAITING), else ErrNotFound (also for a requestNo
// that is not a ticket number). The result, the record and whether the
// ticket is claimed (Entry.Claimed) are read in one round trip. user <= 0
// reads the field alone (no QUEUING but a written one).
func (s *Store) Read(ctx context.Context, user int64, requestNo string) (Entry, error) {
	a, k, b, _, ok := sale.ParseTicket(requestNo)
	if !ok {
		return Entry{}, ErrNotFound
	}
	c := s.route(a, k, b)
	get := c.B().Hget().Key(sale.ResultsKeyIn(a, k, b)).Field(requestNo).Build()
	var v, held string
	var claimed bool
	var err error
	if user <= 0 {
		v, err = c.Do(ctx, get).ToString()
	} else {
		rs := c.DoMulti(ctx, get, c.B().Hget().Key(sale.UsersKeyIn(a, k, b)).Field(strconv.FormatInt(user, 10)).Build(),
			c.B().Sismember().Key(sale.ClaimedKeyIn(a, k, b)).Member(requestNo).Build())
		if v, err = rs[0].ToString(); err == nil || rueidis.IsRedisNil(err) {
			var herr error
			if held, herr = rs[1].ToString(); herr != nil && !rueidis.IsRedisNil(herr) {
				err = herr
			} else if claimed, herr = rs[2].AsBool(); herr != nil {
				err = herr
			}
		}
	}
	if err != nil && !rueidis.IsRedisNil(err) {
		return Entry{}, fmt.Errorf("read result %s: %w", requestNo, err)
	}
	var e Entry
	if err == nil {
		if e, ok = entry(requestNo, v); !ok {
			return Entry{}, fmt.Errorf("read result %s: unreadable value %q", requestNo, v)
		}
	}
	if e, ok = implied(e, requestNo, user, held); !ok {
		return Entry{}, ErrNotFound
	}
	e.Claimed = claimed && e.State == sale.ResultQueuing
	return e, nil
}

// implied is the result e read for requestNo (State empty where no field
// was written) as user reads it, held being the requestNo user's record
// names: a final result stands; a ticket the record names is QUEUING; any
// other field stands. ok is false where there is nothing to read.
func implied(e Entry, requestNo string, user int64, held string) (Entry, bool) {
	if e.State == sale.ResultSuccess || e.State == sale.ResultFail {
		return e, true
	}
	if user > 0 && held == requestNo {
		q := Entry{RequestNo: requestNo, Owner: user, State: sale.ResultQueuing}
		q.Activity, q.SKU, _, _ = sale.ParseRequestNo(requestNo)
		return q, true
	}
	return e, e.State != ""
}

// ReadMany reads the results of requestNos as Read does, users[i] being
// requestNos[i]'s owner (users nil, or users[i] <= 0: the field alone),
// one pipelined round trip per shard (in parallel): out[i] is
// requestNos[i]'s, with an empty State where it has none (or requestNos[i]
// is not a ticket number).
func (s *Store) ReadMany(ctx context.Context, requestNos []string, users []int64) ([]Entry, error) {
	if len(requestNos) == 0 {
		return nil, nil
	}
	if users != nil && len(users) != len(requestNos) {
		return nil, fmt.Errorf("read %d results of %d users", len(requestNos), len(users))
	}
	user := func(i int) int64 {
		if users == nil {
			return 0
		}
		return users[i]
	}
	out := make([]Entry, len(requestNos))
	var gs []group
	for i, rn := range requestNos {
		out[i] = Entry{RequestNo: rn}
		a, k, b, _, ok := sale.ParseTicket(rn)
		if !ok {
			continue
		}
		var g *group
		gs, g = groupOf(gs, s.route(a, k, b))
		g.cmds = append(g.cmds, g.c.B().Hget().Key(sale.ResultsKeyIn(a, k, b)).Field(rn).Build())
		if u := user(i); u > 0 {
			g.cmds = append(g.cmds, g.c.B().Hget().Key(sale.UsersKeyIn(a, k, b)).Field(strconv.FormatInt(u, 10)).Build())
		}
		g.idx = append(g.idx, i)
	}
	if len(gs) == 0 {
		return out, nil
	}
	err := doGroups(ctx, gs, func(g *group, rs []rueidis.RedisResult) error {
		j := 0
		for _, i := range g.idx {
			v, err := rs[j].ToString()
			j++
			var held string
			if user(i) > 0 {
				var herr error
				if held, herr = rs[j].ToString(); herr != nil && !rueidis.IsRedisNil(herr) {
					return fmt.Errorf("%s: %w", requestNos[i], herr)
				}
				j++
			}
			if err != nil && !rueidis.IsRedisNil(err) {
				return fmt.Errorf("%s: %w", requestNos[i], err)
			}
			e := Entry{RequestNo: requestNos[i]}
			if err == nil {
				var ok bool
				if e, ok = entry(requestNos[i], v); !ok {
					return fmt.Errorf("%s: unreadable value %q", requestNos[i], v)
				}
			}
			if e, ok := implied(e, requestNos[i], user(i), held); ok {
				out[i] = e
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read %d results: %w", len(requestNos), err)
	}
	return out, nil
}

// entry reads a result's value; the activity and SKU are the requestNo's.
func entry(requestNo, v string) (Entry, bool) {
	state, owner, orderNo, code, ok := sale.ParseResultValue(v)
	if !ok {
		return Entry{}, false
	}
	e := Entry{RequestNo: requestNo, State: state, Owner: owner, OrderNo: orderNo, Code: code}
	e.Activity, e.SKU, _, _ = sale.ParseRequestNo(requestNo)
	return e, true
}

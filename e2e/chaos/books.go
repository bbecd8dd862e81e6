package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/IBM/sarama"
	"github.com/redis/rueidis"
)

// ---- the books: what Redis and the database hold, read by their documented names ----

// order is one row of seckill_order.
type order struct {
	RequestNo, OrderNo, Status string
	User, SKU, Quantity        int64
}

// logRow is one row of seckill_request_log: the latest state of a ticket's
// story and why.
type logRow struct {
	RequestNo      string
	SKU, User      int64
	Status, Remark string
	OrderNo        string
	Updated        time.Time
}

// skuBooks is everything counted for one SKU.
type skuBooks struct {
	SKU, Initial        int64 // Initial as created by the scenario
	MetaInitial         int64 // meta "initial" in Redis
	Stock, Sold         int64
	StockKey            bool              // the stock key exists
	Users               map[string]string // userId -> requestNo
	Claimed             map[string]bool
	Orders              []order // every status
	LiveUnits           int64   // units in orders not CLOSED
	SnapInitial         int64
	SnapAvail, SnapSold int64
	SnapFound           bool
}

// books is the state of the whole sale.
type books struct {
	SKUs    map[int64]*skuBooks
	Results map[string]map[string]string // every result hash of the SKUs, each read on its shard, by requestNo
	Log     map[string]logRow            // the activity's request log, by requestNo
	// Attempts are the records of the attempts topic by requestNo (queue
	// mode; nil where the system has none): every attempt a line took.
	Attempts map[string]lineAttempt
}

// lineAttempt is one attempt in the attempts topic: whose, and how many
// records carry it (a producer's retry may write one twice).
type lineAttempt struct {
	User, SKU int64
	Records   int
}

// liveOrders maps requestNo and orderNo to every order that holds stock.
func (b *books) liveOrders() (byRN, byNo map[string]order) {
	byRN, byNo = map[string]order{}, map[string]order{}
	for _, sb := range b.SKUs {
		for _, o := range sb.Orders {
			if o.Status != orderClosed {
				byRN[o.RequestNo] = o
				byNo[o.OrderNo] = o
			}
		}
	}
	return byRN, byNo
}

// occupied counts, per SKU, the user records whose ticket is not a live
// order: stock held by a ticket on its way (or by an orphan).
func (b *books) occupied() map[int64]int64 {
	live, _ := b.liveOrders()
	out := map[int64]int64{}
	for id, sb := range b.SKUs {
		for _, rn := range sb.Users {
			if _, ok := live[rn]; !ok {
				out[id]++
			}
		}
	}
	return out
}

// queuing lists the result keys still QUEUING.
func (b *books) queuing() []string { return b.inState(stateQueuing) }

// inState lists the result keys in state.
func (b *books) inState(state string) []string {
	var out []string
	for rn, r := range b.Results {
		if r[fieldState] == state {
			out = append(out, rn)
		}
	}
	sort.Strings(out)
	return out
}

// openLog lists the request-log rows in a state that does not end a
// story, apart from those a declared Redis loss froze (frozenByLoss):
// open must be empty once idle; frozen is reported.
func (b *books) openLog(run *Run) (open, frozen []string) {
	live, _ := b.liveOrders()
	for rn, l := range b.Log {
		if finalLogStates[l.Status] {
			continue
		}
		if why, ok := frozenByLoss(run, b, live, l); ok {
			frozen = append(frozen, why)
			continue
		}
		open = append(open, rn+" "+l.Status+" "+l.Remark)
	}
	sort.Strings(open)
	sort.Strings(frozen)
	return open, frozen
}

// frozenByLoss says whether l is a ticket whose story a declared Redis
// loss froze at COMPENSATING, and tells it: the engine took the unit, a
// later step failed because Redis went away (the buyer got 503, so no
// ticket was acknowledged), and its release failed too, leaving the
// occupancy to the orphan sweeper — but the emptied Redis came back
// without the occupancy, so no sweeper, consumer or engine ever writes the
// FAILED that ends the story. (A product gap, reported as such: the row
// stays COMPENSATING for good.) It must be of a SKU the loss covers,
// written while the fault lasted, not an acknowledged ticket, with no order
// and no record in Redis.
func frozenByLoss(run *Run, b *books, live map[string]order, l logRow) (string, bool) {
	f := run.Fault
	if f == nil || f.Loss == nil || l.Status != "COMPENSATING" || !f.Loss.covers(l.SKU) {
		return "", false
	}
	if l.Updated.After(f.Healed.Add(f.Settle)) {
		return "", false
	}
	if _, acked := run.Tickets[l.RequestNo]; acked {
		return "", false
	}
	if _, ok := live[l.RequestNo]; ok {
		return "", false
	}
	if sb := b.SKUs[l.SKU]; sb == nil || sb.Users[strconv.FormatInt(l.User, 10)] == l.RequestNo || sb.Claimed[l.RequestNo] {
		return "", false
	}
	return fmt.Sprintf("%s(user %d sku %d, %s at %s: %q)", l.RequestNo, l.User, l.SKU, l.Status, l.Updated.Format("15:04:05.000"), l.Remark), true
}

// readBooks reads every SKU in skus (id -> initial stock) from its Redis
// (the hot SKU from the hot shard) with its tickets' results, and the activity's
// orders, request log and snapshots from MariaDB.
func (s *System) readBooks(skus map[int64]int64) (*books, error) {
	b := &books{SKUs: map[int64]*skuBooks{}, Results: map[string]map[string]string{}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The default Redis as the processes address it: on a Redis Cluster
	// the client routes each SKU's keys to the master of its slot.
	def, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: s.defaultRedis(), DisableCache: true})
	if err != nil {
		return nil, err
	}
	defer def.Close()
	shards := map[string]rueidis.Client{}
	defer func() {
		for _, c := range shards {
			c.Close()
		}
	}()
	for sku, initial := range skus {
		c := def
		if addr := s.shardOf(sku); addr != "" {
			if c = shards[addr]; c == nil {
				if c, err = rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true}); err != nil {
					return nil, err
				}
				shards[addr] = c
			}
		}
		k := keysOf(activityID, sku)
		sb := &skuBooks{SKU: sku, Initial: initial}
		rs := c.DoMulti(ctx,
			c.B().Hget().Key(k.Meta).Field("initial").Build(),
			c.B().Get().Key(k.Stock).Build(),
			c.B().Get().Key(k.Sold).Build(),
			c.B().Hgetall().Key(k.Users).Build(),
			c.B().Smembers().Key(k.Claimed).Build(),
		)
		for i, dst := range []*int64{&sb.MetaInitial, &sb.Stock, &sb.Sold} {
			v, err := rs[i].AsInt64()
			if err != nil && !rueidis.IsRedisNil(err) {
				return nil, fmt.Errorf("sku %d: %w", sku, err)
			}
			*dst = v
			if i == 1 {
				sb.StockKey = err == nil
			}
		}
		if sb.Users, err = rs[3].AsStrMap(); err != nil {
			return nil, fmt.Errorf("sku %d users: %w", sku, err)
		}
		members, err := rs[4].AsStrSlice()
		if err != nil {
			return nil, fmt.Errorf("sku %d claimed: %w", sku, err)
		}
		sb.Claimed = map[string]bool{}
		for _, m := range members {
			sb.Claimed[m] = true
		}
		err = s.db.QueryRowContext(ctx, `SELECT initial, available, sold FROM seckill_stock_snapshot
			WHERE activity_id = ? AND sku_id = ?`, activityID, sku).Scan(&sb.SnapInitial, &sb.SnapAvail, &sb.SnapSold)
		sb.SnapFound = err == nil
		b.SKUs[sku] = sb
		// The SKU's tickets' results, on its shard.
		if err := readResults(ctx, c, k.Results, b.Results); err != nil {
			return nil, fmt.Errorf("sku %d results: %w", sku, err)
		}
		// A ticket with no final result that the buyer's record names
		// reads QUEUING (DESIGN §5: the record is its QUEUING result) —
		// unless claimed: a claimed ticket without a final result is
		// answered from the database (an order being written, or one
		// whose result Redis lost), so its result counts as missing.
		for uid, rn := range sb.Users {
			if r := b.Results[rn]; (r == nil || r[fieldState] == stateWaiting) && !sb.Claimed[rn] {
				b.Results[rn] = map[string]string{fieldState: stateQueuing, fieldOwner: uid}
			}
		}
	}
	if err := s.readOrders(ctx, b); err != nil {
		return nil, err
	}
	if b.Log, err = s.readLog(ctx); err != nil {
		return nil, err
	}
	if s.opts.Queue {
		if b.Attempts, err = s.readAttempts(ctx); err != nil {
			return nil, fmt.Errorf("attempts topic: %w", err)
		}
	}
	return b, nil
}

// readAttempts reads every record of the attempts topic, each partition
// from its oldest offset to its newest.
func (s *System) readAttempts(ctx context.Context) (map[string]lineAttempt, error) {
	cfg := sarama.NewConfig()
	cfg.Net.DialTimeout = 2 * time.Second
	client, err := sarama.NewClient([]string{s.brokerAddr}, cfg)
	if err != nil {
		return nil, err
	}
	defer client.Close()
	cons, err := sarama.NewConsumerFromClient(client)
	if err != nil {
		return nil, err
	}
	defer cons.Close()
	parts, err := client.Partitions(attemptsTopic)
	if err != nil {
		return nil, err
	}
	out := map[string]lineAttempt{}
	for _, p := range parts {
		newest, err := client.GetOffset(attemptsTopic, p, sarama.OffsetNewest)
		if err != nil {
			return nil, err
		}
		oldest, err := client.GetOffset(attemptsTopic, p, sarama.OffsetOldest)
		if err != nil {
			return nil, err
		}
		if newest <= oldest {
			continue
		}
		pc, err := cons.ConsumePartition(attemptsTopic, p, oldest)
		if err != nil {
			return nil, err
		}
		for off := oldest; off < newest; {
			select {
			case m := <-pc.Messages():
				off = m.Offset + 1
				var v struct {
					RequestNo string `json:"requestNo"`
					UserID    int64  `json:"userId"`
					SKUID     int64  `json:"skuId"`
				}
				if err := json.Unmarshal(m.Value, &v); err != nil {
					pc.Close()
					return nil, fmt.Errorf("partition %d offset %d: %w", p, m.Offset, err)
				}
				a := out[v.RequestNo]
				a.User, a.SKU, a.Records = v.UserID, v.SKUID, a.Records+1
				out[v.RequestNo] = a
			case <-ctx.Done():
				pc.Close()
				return nil, fmt.Errorf("partition %d read to %d of %d: %w", p, off, newest, ctx.Err())
			}
		}
		pc.Close()
	}
	return out, nil
}

func (s *System) readOrders(ctx context.Context, b *books) error {
	rows, err := s.db.QueryContext(ctx, `SELECT request_no, order_no, status, user_id, sku_id, quantity
		FROM seckill_order WHERE activity_id = ?`, activityID)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var o order
		if err := rows.Scan(&o.RequestNo, &o.OrderNo, &o.Status, &o.User, &o.SKU, &o.Quantity); err != nil {
			return err
		}
		sb := b.SKUs[o.SKU]
		if sb == nil {
			return fmt.Errorf("order %s of sku %d, which the sale does not have", o.OrderNo, o.SKU)
		}
		sb.Orders = append(sb.Orders, o)
		if o.Status != orderClosed {
			sb.LiveUnits += o.Quantity
		}
	}
	return rows.Err()
}

func (s *System) readLog(ctx context.Context) (map[string]logRow, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT request_no, sku_id, user_id, status, remark, order_no, updated_ms
		FROM seckill_request_log WHERE activity_id = ?`, activityID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]logRow{}
	for rows.Next() {
		var (
			l       logRow
			updated int64
		)
		if err := rows.Scan(&l.RequestNo, &l.SKU, &l.User, &l.Status, &l.Remark, &l.OrderNo, &updated); err != nil {
			return nil, err
		}
		l.Updated = time.UnixMilli(updated)
		out[l.RequestNo] = l
	}
	return out, rows.Err()
}

// defaultRedis is the default Redis' addresses as the processes use them.
func (s *System) defaultRedis() []string {
	if len(s.defaultAddrs) > 0 {
		return s.defaultAddrs
	}
	return []string{s.Redis.Addr}
}

// shardOf is the address of the redis-server that holds sku when that is
// not the default Redis ("" for the default).
func (s *System) shardOf(sku int64) string {
	if addr, ok := s.skuShard[sku]; ok {
		return addr
	}
	if sku == skuHot && s.Hot != nil {
		return s.Hot.Addr
	}
	return ""
}

// readResults reads the results hash key of one SKU (on its shard c; a
// cluster client sends it to the SKU's slot) into out, by requestNo: each
// value in its documented form STATE|owner|orderNo|code (DESIGN §5), read
// here by the suite itself into the fields it checks.
func readResults(ctx context.Context, c rueidis.Client, key string, out map[string]map[string]string) error {
	m, err := c.Do(ctx, c.B().Hgetall().Key(key).Build()).AsStrMap()
	if err != nil {
		return err
	}
	for rn, v := range m {
		parts := strings.Split(v, "|")
		if len(parts) != 4 || parts[0] == "" {
			return fmt.Errorf("%s %s: result %q is not STATE|owner|orderNo|code", key, rn, v)
		}
		r := map[string]string{fieldState: parts[0], fieldOwner: parts[1]}
		if parts[2] != "" {
			r[fieldOrderNo] = parts[2]
		}
		if parts[3] != "" {
			r[fieldCode] = parts[3]
		}
		out[rn] = r
	}
	return nil
}

// ---- quiescence ----

// idleState is what quiesce waits to be zero.
type idleState struct {
	lag     int64
	lagErr  error
	booksOK error
	pending []string // accepted tickets whose fate nobody knows yet
	held    int64    // units held without an order (counted where there is a sweeper)
	queuing int      // result keys still QUEUING
	waiting int      // result keys still WAITING (queue mode)
	open    int      // request-log rows in a state that does not end a story
}

func (i idleState) idle() bool {
	return i.lagErr == nil && i.lag == 0 && i.booksOK == nil && len(i.pending) == 0 && i.held == 0 && i.queuing == 0 && i.waiting == 0 && i.open == 0
}

func (i idleState) String() string {
	return fmt.Sprintf("lag %d (%v), books %v, %d accepted tickets without a final answer %v, %d units held without an order, %d results QUEUING, %d WAITING, %d request-log rows not final",
		i.lag, i.lagErr, i.booksOK, len(i.pending), head(i.pending, 5), i.held, i.queuing, i.waiting, i.open)
}

func (s *System) idleState(run *Run, skus map[int64]int64) idleState {
	var st idleState
	st.lag, st.lagErr = s.lag()
	b, err := s.readBooks(skus)
	if err != nil {
		st.booksOK = err
		return st
	}
	st.pending = pendingTickets(run, b)
	if s.sweeper {
		for _, n := range b.occupied() {
			st.held += n
		}
	}
	st.queuing = len(b.queuing())
	st.waiting = len(b.inState(stateWaiting))
	open, _ := b.openLog(run)
	st.open = len(open)
	return st
}

// quiesce waits until the consumer group has no lag (GET /admin/v1/lag),
// every accepted ticket has a final answer, no result key and no
// request-log row is still on its way, and — where the code has an orphan
// sweeper — no occupancy holds stock without an order, up to d. It reports
// what it waited for; the invariant check that follows says whether it got
// there.
func (s *System) quiesce(run *Run, skus map[int64]int64, d time.Duration) {
	s.t.Helper()
	start := time.Now()
	deadline := start.Add(d)
	stable := 0
	for {
		st := s.idleState(run, skus)
		if st.idle() {
			// Twice in a row: a batch between offset commit and the last
			// result write would otherwise slip through.
			if stable++; stable >= 2 {
				s.t.Logf("quiescent after %v: lag 0, every accepted ticket answered, no result or request-log row on its way, no stock held without an order (sweeper: %v)",
					time.Since(start).Round(10*time.Millisecond), s.sweeper)
				return
			}
		} else {
			stable = 0
		}
		if time.Now().After(deadline) {
			s.t.Logf("NOT quiescent after %v: %v", d, st)
			// What were the consumers doing? SIGQUIT makes a Go process
			// write every goroutine's stack to its log, then exit.
			for _, p := range s.consumers {
				if p.Running() {
					p.Stop(syscall.SIGQUIT, 5*time.Second)
					s.t.Logf("%s (not quiescent) was sent SIGQUIT: its goroutines are in %s", p.Name, p.Log)
				}
			}
			return
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// pendingTickets lists accepted tickets and places in line whose fate is
// not known yet: their result is not final (or gone) and the database has
// neither an order nor a failure for them.
func pendingTickets(run *Run, b *books) []string {
	live, _ := b.liveOrders()
	var out []string
	for _, tks := range []map[string]ticket{run.Tickets, run.Waiting, run.Named} {
		for rn := range tks {
			if st := b.Results[rn][fieldState]; st == stateSuccess || st == stateFail {
				continue
			}
			if _, ok := live[rn]; ok {
				continue
			}
			if l, ok := b.Log[rn]; ok && l.Status == "FAILED" {
				continue
			}
			out = append(out, rn)
		}
	}
	sort.Strings(out)
	return slices.Compact(out) // a 202's ticket may be named by a 409 too
}

// quiesceGroup waits until group has committed the newest offset of every
// partition of the orders topic. It reads the offsets itself rather than
// trusting a lag figure: a group that never committed must not pass.
func (s *System) quiesceGroup(group string, d time.Duration) error {
	cfg := sarama.NewConfig()
	cfg.Net.DialTimeout = 2 * time.Second
	client, err := sarama.NewClient([]string{s.brokerAddr}, cfg)
	if err != nil {
		return err
	}
	defer client.Close()
	admin, err := sarama.NewClusterAdminFromClient(client)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(d)
	var last string
	for time.Now().Before(deadline) {
		parts, err := client.Partitions(ordersTopic)
		if err != nil {
			last = err.Error()
			time.Sleep(250 * time.Millisecond)
			continue
		}
		offs, err := admin.ListConsumerGroupOffsets(group, map[string][]int32{ordersTopic: parts})
		if err != nil {
			last = err.Error()
			time.Sleep(250 * time.Millisecond)
			continue
		}
		behind := 0
		var state []string
		for _, p := range parts {
			newest, err := client.GetOffset(ordersTopic, p, sarama.OffsetNewest)
			if err != nil {
				behind++
				continue
			}
			committed := int64(-1)
			if b := offs.GetBlock(ordersTopic, p); b != nil && b.Err == sarama.ErrNoError {
				committed = b.Offset
			}
			if newest > 0 && committed < newest {
				behind++
			}
			state = append(state, fmt.Sprintf("p%d %d/%d", p, committed, newest))
		}
		last = strings.Join(state, ", ")
		if behind == 0 {
			s.t.Logf("group %s committed every message: %s", group, last)
			return nil
		}
		time.Sleep(250 * time.Millisecond)
	}
	return fmt.Errorf("group %s not drained after %v: %s", group, d, last)
}

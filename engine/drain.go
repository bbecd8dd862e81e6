package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/rueidis"
	"go.uber.org/zap"

	"seckill/sale"
	"seckill/stock"
	"seckill/stock/results"
)

// Drainer serves the waiting lines (queue mode, DESIGN §13): a consumer
// group over the attempts topic, so each partition — each SKU's line, in
// order — has one drainer, and another engine takes a partition over when
// its drainer dies. It occupies the attempts of a partition in windows of
// engine.queue.window through the engine's own Occupy (group commit, the
// order message and the QUEUING result as for a direct purchase), under
// the attempt's own ticket number, and writes FAIL with the occupy's
// reason for a refused one.
//
// Exactly once per attempt: an attempt whose ticket already has a result
// other than WAITING is not occupied again (a redelivery after a crash);
// one whose occupy ran but whose result was lost finds its own record in
// the SKU's users hash (DUPLICATE naming its own ticket) and is taken as
// done. An attempt that cannot be verified or decoded, or names a SKU the
// catalog does not sell, is skipped, logged and counted: nothing one
// message holds stops the line. A busy occupy (Redis or Kafka down) is
// retried in order until it answers or the session ends: the line waits,
// it never guesses. After a SKU sold out, the rest of its line ends FAIL
// SOLD_OUT without a Redis call each.
type Drainer struct {
	e     *Local
	cfg   QueueConfig
	sign  *sale.Signer
	group sarama.ConsumerGroup
	kc    sarama.Client // the group's: the partitions' high water marks at a pre-queue's draw
	def   rueidis.Client
	log   *zap.Logger
	m     *drainMetrics

	mu      sync.Mutex
	soldOut map[skuKey]bool
	paced   map[skuKey]time.Time // the earliest start of the SKU's next attempt (its Rate)

	runMu  sync.Mutex
	closed bool
	stop   chan struct{}
	runs   sync.WaitGroup
}

// NewDrainer joins the drainers' group cfg.Group (engine.queue) over e's
// brokers.
func NewDrainer(e *Local, cfg QueueConfig, log *zap.Logger, reg prometheus.Registerer) (*Drainer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	sign, err := sale.NewSigner(sale.AttemptSigning(e.cfg.Signing))
	if err != nil {
		return nil, err
	}
	sc := sarama.NewConfig()
	sc.ClientID = "seckill-drainer"
	sc.Consumer.Offsets.Initial = sarama.OffsetOldest
	sc.Consumer.Offsets.AutoCommit.Enable = true
	sc.Consumer.Offsets.AutoCommit.Interval = cfg.Progress
	sc.Consumer.Return.Errors = true
	sc.Consumer.Group.Session.Timeout = cfg.SessionTimeout
	sc.Consumer.Group.Heartbeat.Interval = cfg.SessionTimeout / 3
	sc.Consumer.MaxWaitTime = 50 * time.Millisecond
	sc.ChannelBufferSize = max(256, cfg.Window)
	sc.Net.DialTimeout = 2 * time.Second
	sc.Metadata.Retry.Backoff = 100 * time.Millisecond
	if err := e.cfg.Kafka.Security.Apply(sc); err != nil {
		return nil, fmt.Errorf("engine.kafka: %w", err)
	}
	kc, err := sarama.NewClient(e.cfg.Kafka.Brokers, sc)
	if err != nil {
		return nil, fmt.Errorf("drainer group %s: %w", cfg.Group, err)
	}
	g, err := sarama.NewConsumerGroupFromClient(cfg.Group, kc)
	if err != nil {
		kc.Close()
		return nil, fmt.Errorf("drainer group %s: %w", cfg.Group, err)
	}
	d := &Drainer{e: e, cfg: cfg, sign: sign, group: g, kc: kc, def: e.stock.Shards().Default, log: log,
		m: newDrainMetrics(reg), soldOut: map[skuKey]bool{}, paced: map[skuKey]time.Time{}, stop: make(chan struct{})}
	go func() {
		for err := range g.Errors() {
			log.Warn("drainer group error", zap.Error(err))
		}
	}()
	return d, nil
}

// Run drains until ctx is done or Close is called, joining the group
// again after every rebalance or failed session.
func (d *Drainer) Run(ctx context.Context) error {
	d.runMu.Lock()
	if d.closed {
		d.runMu.Unlock()
		return nil
	}
	d.runs.Add(1)
	d.runMu.Unlock()
	defer d.runs.Done()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-d.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	for ctx.Err() == nil {
		err := d.group.Consume(ctx, []string{d.cfg.Topic}, d)
		if errors.Is(err, sarama.ErrClosedConsumerGroup) || ctx.Err() != nil {
			return nil
		}
		if err != nil {
			d.log.Warn("drainer session ended; joining again", zap.Error(err))
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
	return nil
}

// Close stops Run (a window in progress is finished or left uncommitted,
// to be drained again) and leaves the group.
func (d *Drainer) Close() error {
	d.runMu.Lock()
	if d.closed {
		d.runMu.Unlock()
		return nil
	}
	d.closed = true
	close(d.stop)
	d.runMu.Unlock()
	d.runs.Wait()
	err := d.group.Close()
	if cerr := d.kc.Close(); err == nil {
		err = cerr
	}
	return err
}

// Setup implements sarama.ConsumerGroupHandler.
func (d *Drainer) Setup(sarama.ConsumerGroupSession) error { return nil }

// Cleanup implements sarama.ConsumerGroupHandler.
func (d *Drainer) Cleanup(sarama.ConsumerGroupSession) error { return nil }

// ConsumeClaim drains one partition in windows: up to engine.queue.window
// attempts that are there, occupied together; their offset is marked only
// once all of them are decided.
func (d *Drainer) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	ctx := sess.Context()
	msgs := claim.Messages()
	win := make([]*sarama.ConsumerMessage, 0, d.cfg.Window)
	prog := newProgress(claim.Partition(), claim.InitialOffset())
	// The progress is published on its own beat, so a line stuck on a
	// busy shard shows a drain rate of 0 while it waits.
	reported := make(chan struct{})
	go func() { defer close(reported); d.report(ctx, prog, claim) }()
	defer func() { <-reported }()
	// pending are attempts read ahead by a pre-queue's service, drained
	// before the channel's.
	var pending []*sarama.ConsumerMessage
	pq := &prequeues{}
	for {
		win = win[:0]
		if len(pending) > 0 {
			n := min(len(pending), cap(win))
			win = append(win, pending[:n]...)
			pending = pending[n:]
		} else {
			select {
			case m, ok := <-msgs:
				if !ok {
					return nil
				}
				win = append(win, m)
			case <-ctx.Done():
				return nil
			}
		fill:
			for len(win) < cap(win) {
				select {
				case m, ok := <-msgs:
					if !ok {
						break fill
					}
					win = append(win, m)
				default:
					break fill
				}
			}
		}
		if i, k := d.prequeueAt(win, pq); i >= 0 {
			// A pre-queue's first attempt: what lies before it is served
			// now, then the pre-queue in its drawn order (drainprequeue.go).
			if i > 0 {
				if !d.window(ctx, claim.Partition(), win[:i]) {
					return nil
				}
				sess.MarkOffset(claim.Topic(), claim.Partition(), win[i-1].Offset+1, "")
				prog.done(win[i-1].Offset+1, i, time.Now())
			}
			rest := append(slices.Clone(win[i:]), pending...)
			left, ok := d.servePrequeue(ctx, sess, claim, prog, k, rest, pq)
			if !ok {
				return nil
			}
			pending = left
			continue
		}
		if !d.window(ctx, claim.Partition(), win) {
			return nil // the session ended: the window is drained again
		}
		last := win[len(win)-1]
		sess.MarkOffset(claim.Topic(), claim.Partition(), last.Offset+1, "")
		prog.done(last.Offset+1, len(win), time.Now())
	}
}

// report publishes prog every engine.queue.progress until ctx ends.
func (d *Drainer) report(ctx context.Context, prog *progress, claim sarama.ConsumerGroupClaim) {
	t := time.NewTicker(d.cfg.Progress)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		d.publish(ctx, prog, claim.HighWaterMarkOffset())
	}
}

// attempt is one decoded attempt of a window.
type attempt struct {
	m     sale.Message
	a     *sale.Activity
	k     *sale.SKU
	place string // "<partition>:<offset>", as the WAITING result names it
	err   error
}

// window decides every attempt of win; false when the session ended before
// all were decided.
func (d *Drainer) window(ctx context.Context, part int32, win []*sarama.ConsumerMessage) bool {
	ats := make([]attempt, 0, len(win))
	reloaded := false
	for _, km := range win {
		at, why, err := d.decode(km)
		if why == whyUnknownSKU && !reloaded {
			// The attempt may name an activity newer than this engine's
			// copy of the catalog (an edge that loaded it first took the
			// attempt): read the catalog again before calling it poison,
			// once a window.
			if !d.reloadCatalog(ctx) {
				return false
			}
			reloaded = true
			at, why, err = d.decode(km)
		}
		if why != "" {
			d.poison(part, km.Offset, why, err)
			continue
		}
		ats = append(ats, at)
	}
	if len(ats) == 0 {
		return true
	}
	// A redelivered attempt whose ticket has a result past WAITING was
	// decided already (QUEUING: the buyer's record names it).
	rns := make([]string, len(ats))
	users := make([]int64, len(ats))
	for i := range ats {
		rns[i], users[i] = ats[i].m.RequestNo, ats[i].m.UserID
	}
	var have []results.Entry
	for {
		var err error
		if have, err = d.e.res.ReadMany(ctx, rns, users); err == nil {
			break
		}
		if !d.backoff(ctx, err) {
			return false
		}
	}
	todo := make([]int, 0, len(ats))
	var fails []results.Entry
	for i := range ats {
		at := &ats[i]
		switch {
		case have[i].State != "" && have[i].State != sale.ResultWaiting:
			d.m.decided.WithLabelValues("redelivered").Inc()
		case have[i].State == sale.ResultWaiting && d.isSoldOut(at.a.ID, at.k.ID):
			// Only a ticket readable as WAITING: one with nothing to
			// read (no field, no record naming it: its field expired,
			// or a shard lost it) goes to the ledger, which tells.
			at.err = stock.ErrSoldOut
			fails = append(fails, failOf(at))
		default:
			todo = append(todo, i)
		}
	}
	// The window's occupies run together (one group commit), started in
	// line order: each starts once the one before holds its place in the
	// SKU's queue, so the ledger takes them in the line's order (the last
	// units go to the first in line, not to whichever goroutine ran first).
	var wg sync.WaitGroup
	for _, i := range todo {
		at := &ats[i]
		if !d.pace(ctx, at.a.ID, at.k) {
			wg.Wait()
			return false
		}
		queued := make(chan struct{})
		var once sync.Once
		mark := func() { once.Do(func() { close(queued) }) }
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer mark() // decided without reaching the queue
			at.err = d.occupy(ctx, at, mark)
		}()
		<-queued
	}
	wg.Wait()
	if ctx.Err() != nil {
		return false
	}
	for _, i := range todo {
		at := &ats[i]
		if at.err != nil && have[i].State == "" {
			// No result at all, and refused by a rule the script judges
			// before the buyer's record: the record may be this ticket's
			// own, from an earlier delivery.
			own, ok := d.holdsOwn(ctx, at)
			if !ok {
				return false
			}
			if own {
				at.err = nil
			}
		}
		switch {
		case at.err == nil:
			d.m.decided.WithLabelValues("ok").Inc()
		default:
			if errors.Is(at.err, stock.ErrSoldOut) {
				d.markSoldOut(at.a.ID, at.k.ID)
			}
			fails = append(fails, failOf(at))
		}
	}
	for len(fails) > 0 {
		err := d.e.res.Write(ctx, fails...)
		if err == nil {
			break
		}
		if !d.backoff(ctx, err) {
			return false
		}
	}
	for _, f := range fails {
		d.m.decided.WithLabelValues(f.Code).Inc()
	}
	// A refused attempt (the one kind with an error now: each is a FAIL
	// above) is a refusal of its buyer (RefusalLog), naming the ticket,
	// after its FAIL result is written, so a redelivery, which finds that
	// result, records nothing again. Not a step of the ticket's own row: a
	// ticket whose result was lost may have an order that row tells of.
	if rl, ok := d.e.reqlog.(RefusalLog); ok {
		for i := range ats {
			if m := &ats[i].m; ats[i].err != nil {
				rl.Refused(m.ActivityID, m.SKUID, m.UserID, m.Quantity, stock.OutcomeOf(ats[i].err).Wire(),
					"refused in line: ticket "+m.RequestNo, m.TraceID)
			}
		}
	}
	d.unwait(ctx, ats)
	now := time.Now().UnixMilli()
	for i := range ats {
		if w := now - ats[i].m.AcceptedAt; w >= 0 {
			d.m.wait.Observe(float64(w) / 1000)
		}
	}
	return true
}

// decode reads and verifies one attempt; why names what is wrong with
// one that cannot be served ("" for none).
func (d *Drainer) decode(km *sarama.ConsumerMessage) (at attempt, why string, err error) {
	at.place = strconv.Itoa(int(km.Partition)) + ":" + strconv.FormatInt(km.Offset, 10)
	if at.m, err = sale.DecodeMessage(km.Value); err != nil {
		return at, "undecodable", err
	}
	if err := d.sign.Verify(km.Value, &at.m); err != nil {
		return at, "unverifiable", err
	}
	var ok bool
	if at.a, at.k, ok = d.e.stock.Catalog().Lookup(at.m.ActivityID, at.m.SKUID); !ok {
		return at, whyUnknownSKU, nil
	}
	if _, _, _, ok := sale.ParseRequestNo(at.m.RequestNo); !ok || at.m.UserID <= 0 {
		return at, "malformed", nil
	}
	return at, "", nil
}

// whyUnknownSKU names an attempt of a SKU the catalog does not sell.
const whyUnknownSKU = "unknown_sku"

// reloadCatalog reads the catalog from Redis, retrying until it answers;
// false when ctx ended first (the line waits rather than skip attempts it
// could not look up).
func (d *Drainer) reloadCatalog(ctx context.Context) bool {
	for {
		lctx, cancel := context.WithTimeout(ctx, 2*d.e.cfg.OccupyTimeout)
		err := d.e.stock.Catalog().Load(lctx)
		cancel()
		if err == nil {
			return true
		}
		if !d.backoff(ctx, err) {
			return false
		}
	}
}

func failOf(at *attempt) results.Entry {
	return results.Entry{RequestNo: at.m.RequestNo, Activity: at.m.ActivityID, SKU: at.m.SKUID, Owner: at.m.UserID,
		State: sale.ResultFail, Code: stock.OutcomeOf(at.err).Wire()}
}

// occupy runs one attempt through the engine, retrying a busy answer
// until it is decided or ctx ends. nil: the ticket holds stock (now, or
// from an earlier delivery).
func (d *Drainer) occupy(ctx context.Context, at *attempt, queued func()) error {
	r := &Request{Activity: at.a, SKU: at.k, UserID: at.m.UserID, Quantity: at.m.Quantity,
		TraceID: at.m.TraceID, RequestNo: at.m.RequestNo, Queued: queued, Place: at.place}
	// The occupy itself outlives the session (it is bounded by the
	// engine's own timeouts): cut short, its order message would be
	// compensated and the attempt end FAIL BUSY though it held its place.
	octx := context.WithoutCancel(ctx)
	for {
		t, err := d.e.Occupy(octx, r)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, stock.ErrDuplicate) && t.RequestNo == at.m.RequestNo:
			// Its own record: an earlier delivery occupied it.
			return nil
		case !errors.Is(err, ErrBusy):
			return err
		}
		if !d.backoff(ctx, err) {
			return err
		}
	}
}

// holdsOwn reports whether an attempt refused NOT_OPEN or ENDED (the
// rules the occupy script judges before it reads the buyer's record)
// holds stock under its own ticket all the same: the buyer's record names
// it. Any other refusal was judged after the record, and is not its own.
// Retries a failed read; ok false when ctx ended first.
func (d *Drainer) holdsOwn(ctx context.Context, at *attempt) (own, ok bool) {
	if !errors.Is(at.err, stock.ErrNotOpen) && !errors.Is(at.err, stock.ErrEnded) {
		return false, true
	}
	for {
		hctx, cancel := context.WithTimeout(ctx, 2*d.e.cfg.OccupyTimeout)
		rn, _, err := d.e.stock.Holder(hctx, at.a.ID, at.k.ID, at.m.UserID)
		cancel()
		if err == nil {
			return rn == at.m.RequestNo, true
		}
		if !d.backoff(ctx, err) {
			return false, false
		}
	}
}

// unwait removes the decided attempts' buyers from their SKUs' waiting
// records (best effort: a record left behind is found stale by the next
// attempt of its buyer, whose ticket has ended).
func (d *Drainer) unwait(ctx context.Context, ats []attempt) {
	// Not the session's context: decided attempts are done even when the
	// session ends now.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*d.e.cfg.OccupyTimeout)
	defer cancel()
	// One pipelined call per shard, however many SKUs the window holds.
	type batch struct {
		c    rueidis.Client
		cmds rueidis.Commands
	}
	var bs []batch
	for i := range ats {
		at := &ats[i]
		c := d.e.stock.Client(at.a.ID, at.k.ID)
		j := 0
		for j < len(bs) && bs[j].c != c {
			j++
		}
		if j == len(bs) {
			bs = append(bs, batch{c: c})
		}
		bs[j].cmds = append(bs[j].cmds, c.B().Hdel().Key(sale.WaitingKey(at.a.ID, at.k.ID)).Field(strconv.FormatInt(at.m.UserID, 10)).Build())
	}
	for _, b := range bs {
		for _, r := range b.c.DoMulti(ctx, b.cmds...) {
			if err := r.Error(); err != nil {
				d.log.Warn("waiting records not removed; each is found stale at its buyer's next attempt", zap.Int("attempts", len(ats)), zap.Error(err))
				break
			}
		}
	}
}

// pace holds back the SKU's next attempt to its rate, read from the
// catalog at each step so that on-call's change applies at once (a rate
// lowered or lifted mid-window); false when ctx ended.
func (d *Drainer) pace(ctx context.Context, activity int64, k *sale.SKU) bool {
	key := skuKey{activity, k.ID}
	for {
		rate := k.Rate
		if _, cur, ok := d.e.stock.Catalog().Lookup(activity, k.ID); ok {
			rate = cur.Rate
		}
		now := time.Now()
		d.mu.Lock()
		last := d.paced[key]
		next := last.Add(time.Second / time.Duration(max(rate, 1)))
		if rate <= 0 || !next.After(now) {
			d.paced[key] = now
			d.mu.Unlock()
			return true
		}
		d.mu.Unlock()
		t := time.NewTimer(min(next.Sub(now), 100*time.Millisecond))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return false
		}
	}
}

func (d *Drainer) isSoldOut(activity, sku int64) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.soldOut[skuKey{activity, sku}]
}

// markSoldOut remembers a SKU whose stock ran out (a SOLD_OUT with nothing
// left) for the rest of its line; a restock reaches the line through the
// SKU's available event (HandleEvent).
func (d *Drainer) markSoldOut(activity, sku int64) {
	d.mu.Lock()
	d.soldOut[skuKey{activity, sku}] = true
	d.mu.Unlock()
}

// HandleEvent follows the sale's events: a SKU available again (restock,
// release) is drained through Redis again.
func (d *Drainer) HandleEvent(e sale.Event) {
	if e.Kind == sale.EventAvailable {
		d.mu.Lock()
		delete(d.soldOut, skuKey{e.Activity, e.SKU})
		d.mu.Unlock()
	}
}

// backoff waits before a retry after err; false when ctx ended.
func (d *Drainer) backoff(ctx context.Context, err error) bool {
	d.m.retries.Inc()
	t := time.NewTimer(100 * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func (d *Drainer) poison(part int32, off int64, why string, err error) {
	d.m.decided.WithLabelValues("skipped_" + why).Inc()
	d.log.Warn("attempt skipped", zap.Int32("partition", part), zap.Int64("offset", off), zap.String("why", why), zap.Error(err))
}

// publish writes the partition's progress to sale.DrainedKey and the
// line's length to the metrics.
func (d *Drainer) publish(ctx context.Context, p *progress, high int64) {
	now := time.Now()
	next, rate := p.read(now)
	if next < 0 {
		return
	}
	v := sale.AppendDrained(nil, next, rate, now.UnixMilli())
	part := strconv.Itoa(int(p.part))
	pctx, cancel := context.WithTimeout(ctx, d.cfg.Progress)
	err := d.def.Do(pctx, d.def.B().Hset().Key(sale.DrainedKey).FieldValue().FieldValue(part, string(v)).Build()).Error()
	cancel()
	if err != nil && ctx.Err() == nil {
		d.log.Debug("drain progress not published", zap.Error(err))
	}
	d.m.length.WithLabelValues(part).Set(float64(max(high-next, 0)))
	d.m.rate.WithLabelValues(part).Set(rate)
}

// skuKey names one SKU of one activity: a line's key in the drainer's maps.
type skuKey struct{ activity, sku int64 }

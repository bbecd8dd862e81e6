// Package reconcile keeps the books of a sale adding up (DESIGN §8): the
// Reconciler compares, per activity and SKU, Redis (initial, remaining,
// sold, user records, claimed set) with the database (stock snapshot,
// orders) and reports every kind of drift by name; on request it applies
// the repairs that are provably safe. The Sweeper part releases orphan
// occupancies (a ticket whose message never reached Kafka), and the
// Watcher part writes back, from the database, SKUs a Redis lost.
//
// Metrics are listed in metrics.go; docs/operations-ledger.md is the
// operator's guide to every drift kind and repair.
package reconcile

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"seckill/sale"
	"seckill/stock"
	"seckill/stock/results"
	"seckill/store"
)

// Drift kinds, each a quantity that is 0 when the books add up.
const (
	// KindLedger is DESIGN §8's identity: ordered units + live
	// occupancies + Redis remaining − initial. The sum of the kinds below
	// that explain it; never repaired as such.
	KindLedger = "ledger"
	// KindInitial: Redis meta initial − database snapshot initial (a
	// restock half done, a replaced activity). Not repaired.
	KindInitial = "initial"
	// KindRedisLedger: Redis remaining + sold − initial. The scripts keep
	// it 0; anything else is a hand edit or a partial restore. Not
	// repaired.
	KindRedisLedger = "redis_ledger"
	// KindRedisRecords: Redis sold − units held by user records, for SKUs
	// of one unit per ticket. Positive: units no ticket holds; negative:
	// tickets whose units sold does not count. Repaired by settle.lua when
	// nothing else is off.
	KindRedisRecords = "redis_records"
	// KindDBSnapshot: snapshot sold − units of live orders (or, if that
	// is 0, snapshot initial − available − units). Repaired by recounting
	// the snapshot from the orders.
	KindDBSnapshot = "db_snapshot"
	// KindOversell: units of live orders above the initial stock. Never
	// repaired: an operator decides which orders to cancel.
	KindOversell = "oversell"
	// KindOrderWithoutClaim: live orders whose buyer's record in Redis
	// does not name them (Redis lost it). Repaired by restoring the
	// claimed record where the buyer holds none.
	KindOrderWithoutClaim = "order_without_claim"
	// KindClaimedWithoutOrder: claimed records past the grace period with
	// no live order and no pending release, whose message Kafka proves
	// consumed (or whose order was closed). Repaired by a forced release.
	KindClaimedWithoutOrder = "claimed_without_order"
	// KindOrphan: unclaimed records past the grace period with no order,
	// whose message Kafka proves never coming. Repaired by a release
	// (force=false) — the sweeper's job, done here too on repair.
	KindOrphan = "orphan"
	// KindRedisMissing: the SKU's keys are missing from Redis (it lost
	// them); the watcher rebuilds them from the database.
	KindRedisMissing = "redis_missing"
	// KindBuckets: units a SKU split into buckets is off in its buckets'
	// own books (initial + credited − debited = remaining + sold per
	// bucket), the sum over the buckets. Not repaired: a hand edit, a
	// partial restore or a transfer script gone wrong; an operator
	// decides.
	KindBuckets = "buckets"
)

// Kinds lists every drift kind (the metric's label values).
var Kinds = []string{KindLedger, KindInitial, KindRedisLedger, KindRedisRecords, KindDBSnapshot, KindOversell,
	KindOrderWithoutClaim, KindClaimedWithoutOrder, KindOrphan, KindRedisMissing, KindBuckets}

// Through proves how far the consumer got: lag.Reader implements it.
type Through interface {
	ConsumedThrough(ctx context.Context) (time.Time, error)
}

// Report is one reconciliation.
type Report struct {
	At     time.Time `json:"at"`
	Repair bool      `json:"repair"`
	// ConsumedThrough: every message produced before it is committed as
	// an order or an answer; nil when Kafka could not tell (then no
	// occupancy is judged stale).
	ConsumedThrough *time.Time  `json:"consumedThrough,omitempty"`
	Drifts          int         `json:"drifts"` // drifts found over all SKUs
	Repairs         int         `json:"repairs"`
	SKUs            []SKUReport `json:"skus"`
	Warnings        []string    `json:"warnings,omitempty"`
}

// SKUReport is one SKU's line.
type SKUReport struct {
	ActivityID int64 `json:"activityId"`
	SKUID      int64 `json:"skuId"`
	// Mode says how the SKU was compared: ModeFull (Run, and the periodic
	// pass after a sale), ModeCounters (the periodic pass while it runs),
	// ModeExpired (its keys outlived their retention and are gone),
	// ModeAudit (not judged this pass: what the audit of its new orders
	// found before that).
	Mode  string `json:"mode"`
	Redis struct {
		Present   bool  `json:"present"`
		Initial   int64 `json:"initial"`
		Remaining int64 `json:"remaining"`
		Sold      int64 `json:"sold"`
		Records   int64 `json:"records"`
		Claimed   int64 `json:"claimed"`
		Pending   int64 `json:"pending"` // records not claimed
	} `json:"redis"`
	DB struct {
		Initial   int64 `json:"initial"`
		Available int64 `json:"available"`
		Sold      int64 `json:"sold"`
		Orders    int64 `json:"orders"` // live
		Units     int64 `json:"units"`  // of live orders
	} `json:"db"`
	Drifts  []Drift  `json:"drifts,omitempty"`
	Repairs []Repair `json:"repairs,omitempty"`
	// Reindexed counts pending-journal entries this run added (unclaimed
	// records no entry names: tickets taken before the journal existed, a
	// hand edit). Done on every run, repair or not: the journal is the
	// sweeper's view and changes no stock.
	Reindexed int64 `json:"reindexed,omitempty"`
}

// setRedis fills the line's Redis half from one atomic read.
func (l *SKUReport) setRedis(led stock.Ledger) {
	l.Redis.Present, l.Redis.Initial, l.Redis.Remaining = led.Present, led.Initial, led.Remaining
	l.Redis.Sold, l.Redis.Records, l.Redis.Claimed = led.Sold, led.Holders, led.Claimed
	l.Redis.Pending = led.Pending
}

// Drift is one kind of drift found.
type Drift struct {
	Kind   string `json:"kind"`
	Amount int64  `json:"amount"`
	Detail string `json:"detail"`
}

// Repair is one repair applied.
type Repair struct {
	Kind   string `json:"kind"`
	Amount int64  `json:"amount"`
	Detail string `json:"detail"`
}

// Reconciler runs reconciliations, sweeps and watches. Safe for
// concurrent use; runs of one kind are serialised.
type Reconciler struct {
	stock   *stock.Stock
	st      store.Store
	res     *results.Store
	through Through
	log     *zap.Logger
	cfg     Config
	now     func() time.Time
	m       *metrics

	runMu   sync.Mutex
	sweepMu sync.Mutex
	watchMu sync.Mutex
	missing map[[3]int64]bool // SKUs (activity, sku, bucket) the last Watch found missing
	loading bool              // the last Watch met a loading Redis (watchMu)
	pass    passState         // the periodic pass's watermark and memory (runMu)

	settleOnce sync.Once
	settling   *settle // Settle's bounds (settle.go)
}

// Option is a test seam.
type Option func(*Reconciler)

// WithClock replaces time.Now.
func WithClock(now func() time.Time) Option { return func(r *Reconciler) { r.now = now } }

// New returns a Reconciler. through may be nil: nothing is then judged
// stale (no orphan release, no stale-claim repair).
func New(cfg Config, stock *stock.Stock, st store.Store, res *results.Store, through Through, log *zap.Logger,
	reg prometheus.Registerer, opts ...Option) *Reconciler {
	r := &Reconciler{stock: stock, st: st, res: res, through: through, log: log, cfg: cfg, now: time.Now, m: newMetrics(reg),
		pass: passState{audited: map[[2]int64]bool{}, behind: map[[2]int64]int64{}, expired: map[[2]int64]bool{}, forgotten: map[int64]bool{}, bySKU: map[[2]int64][]int{}}}
	for _, o := range opts {
		o(r)
	}
	return r
}

// Know creates the drift series of every SKU in the database, so they
// exist from the first scrape.
func (r *Reconciler) Know(ctx context.Context) error {
	acts, err := r.st.Activities(ctx)
	if err != nil {
		return err
	}
	r.m.know(acts)
	return nil
}

// KnowActivity creates the drift series of a's SKUs (an activity created
// or changed after start).
func (r *Reconciler) KnowActivity(a *sale.Activity) { r.m.know([]sale.Activity{*a}) }

// consumedThrough asks Kafka; the zero time when it cannot tell.
func (r *Reconciler) consumedThrough(ctx context.Context) (time.Time, error) {
	if r.through == nil {
		return time.Time{}, fmt.Errorf("no Kafka lag reader")
	}
	return r.through.ConsumedThrough(ctx)
}

// stale reports whether ticket rn is past the grace period both by the
// clock and by what the consumer has committed: no message for it can
// still be on its way.
func (r *Reconciler) stale(rn string, now, through time.Time) bool {
	t, ok := sale.RequestNoTime(rn)
	if !ok {
		return false
	}
	d := t.Add(r.cfg.OrphanGrace)
	return d.Before(now) && d.Before(through)
}

// Run reconciles every SKU of every activity in the database. With repair
// it applies the safe repairs (see each kind) and reports them; the drifts
// in the report are those found before repairing. It logs one line per
// drift and sets seckill_reconcile_drift.
func (r *Reconciler) Run(ctx context.Context, repair bool) (Report, error) {
	r.runMu.Lock()
	defer r.runMu.Unlock()
	rep := Report{At: r.now(), Repair: repair}
	acts, err := r.st.Activities(ctx)
	if err != nil {
		r.m.runs.WithLabelValues("error").Inc()
		return rep, fmt.Errorf("reconcile: %w", err)
	}
	through, err := r.consumedThrough(ctx)
	if err != nil {
		rep.Warnings = append(rep.Warnings, "consumer progress unknown, no occupancy judged stale: "+err.Error())
	} else if !through.IsZero() {
		rep.ConsumedThrough = &through
	}
	rel, err := r.st.PendingReleases(ctx, 100000)
	if err != nil {
		r.m.runs.WithLabelValues("error").Inc()
		return rep, fmt.Errorf("reconcile: %w", err)
	}
	pending := make(map[string]bool, len(rel))
	for _, x := range rel {
		pending[x.RequestNo] = true
	}
	if err := r.stock.Catalog().Load(ctx); err != nil {
		rep.Warnings = append(rep.Warnings, "catalog not loaded: "+err.Error())
	}
	r.m.know(acts)
	// A SKU that cannot be compared (its shard down) is reported; the
	// others are compared all the same.
	var failed skuErrors
	down := r.newShardsDown()
	for i := range acts {
		a := &acts[i]
		for j := range a.SKUs {
			if ctx.Err() != nil {
				break
			}
			k := &a.SKUs[j]
			if err := down.skip(a, k, sale.NoBucket); err != nil {
				failed.add(&rep, a, k, err)
				continue
			}
			line, err := r.checkSKU(ctx, a, k, through, pending, repair)
			if err != nil {
				failed.add(&rep, a, k, err)
				down.failed(ctx, a, k, sale.NoBucket)
				continue
			}
			r.report(&rep, a, line)
		}
	}
	sortLines(rep.SKUs)
	if err := failed.err(ctx); err != nil {
		r.m.runs.WithLabelValues("error").Inc()
		return rep, fmt.Errorf("reconcile: %w", err)
	}
	r.m.runs.WithLabelValues("ok").Inc()
	if rep.Drifts == 0 {
		r.log.Debug("reconciled: the books add up", zap.Int("skus", len(rep.SKUs)))
	} else {
		r.log.Warn("reconciled with drift", zap.Int("skus", len(rep.SKUs)), zap.Int("drifts", rep.Drifts),
			zap.Int("repairs", rep.Repairs), zap.Bool("repair", repair))
	}
	return rep, nil
}

// skuErrors are the SKUs a pass, a full comparison or a sweep could not
// judge, each with its error: a SKU whose shard is down (a read gives up
// after its retries, internal/shard) or whose reads fail does not keep the
// SKUs of the other shards from being judged. Each is also a warning of
// the report.
type skuErrors []error

// add records that k of a (nil: the activity itself) could not be judged.
func (e *skuErrors) add(rep *Report, a *sale.Activity, k *sale.SKU, err error) {
	if k != nil {
		err = fmt.Errorf("activity %d sku %d: %w", a.ID, k.ID, err)
	} else {
		err = fmt.Errorf("activity %d: %w", a.ID, err)
	}
	*e = append(*e, err)
	if rep != nil {
		rep.Warnings = append(rep.Warnings, "not judged: "+err.Error())
	}
}

// err is every SKU's error joined, and ctx's if it ended the pass before
// every SKU was judged; nil when there is neither.
func (e skuErrors) err(ctx context.Context) error {
	errs := []error(e)
	if err := ctx.Err(); err != nil {
		errs = append(errs, fmt.Errorf("cut short: %w", err))
	}
	return errors.Join(errs...)
}

// orderCutoff: orders created after the Redis read minus this margin are
// left out of the comparison with Redis (their units are counted as
// occupancy, which is what Redis saw); the margin covers clock skew
// between the consumer's host and this one.
const orderCutoff = 2 * time.Second

// ticket is a user record the reconciler may release.
type ticket struct {
	user    int64
	rn      string
	qty     int64
	unknown bool            // qty is not known (stock.Records.UnitsOf): report, never release
	order   *store.OrderRef // a closed order of the ticket, if any
	force   bool
	reason  string
}

func (r *Reconciler) checkSKU(ctx context.Context, a *sale.Activity, k *sale.SKU, through time.Time,
	pending map[string]bool, repair bool) (SKUReport, error) {
	line := SKUReport{ActivityID: a.ID, SKUID: k.ID, Mode: ModeFull}
	add := func(kind string, amount int64, format string, args ...any) {
		if amount != 0 {
			line.Drifts = append(line.Drifts, Drift{Kind: kind, Amount: amount, Detail: fmt.Sprintf(format, args...)})
		}
	}
	repaired := func(kind string, amount int64, format string, args ...any) {
		line.Repairs = append(line.Repairs, Repair{Kind: kind, Amount: amount, Detail: fmt.Sprintf(format, args...)})
		r.m.repairs.WithLabelValues(kind).Inc()
		r.log.Warn("repaired", zap.Int64("activityId", a.ID), zap.Int64("skuId", k.ID), zap.String("kind", kind),
			zap.Int64("amount", amount), zap.String("detail", line.Repairs[len(line.Repairs)-1].Detail))
	}

	readAt := r.now()
	led, per, err := r.ledgers(ctx, a, k)
	if err != nil {
		return line, err
	}
	line.setRedis(led)
	var recs stock.Records
	if led.Present {
		if recs, err = r.stock.Records(ctx, a.ID, k); err != nil {
			return line, err
		}
	}
	sn, refs, err := r.st.Ledger(ctx, a.ID, k.ID)
	if err != nil {
		return line, err
	}
	line.DB.Initial, line.DB.Available, line.DB.Sold = sn.Initial, sn.Available, sn.Sold
	live := map[string]store.OrderRef{}
	all := make(map[string]store.OrderRef, len(refs))
	for _, o := range refs {
		all[o.RequestNo] = o
		if o.Live() {
			live[o.RequestNo] = o
			line.DB.Orders++
			line.DB.Units += o.Quantity
		}
	}

	// The database on its own.
	snap := sn.Sold - line.DB.Units
	if snap == 0 {
		snap = sn.Initial - sn.Available - line.DB.Units
	}
	add(KindDBSnapshot, snap, "snapshot sold %d, available %d of %d; live orders hold %d", sn.Sold, sn.Available,
		sn.Initial, line.DB.Units)
	oversold := max(line.DB.Units-sn.Initial, 0)
	add(KindOversell, oversold, "live orders hold %d units of %d", line.DB.Units, sn.Initial)
	if repair && snap != 0 {
		before, after, err := r.st.RecountSnapshot(ctx, a.ID, k.ID)
		if err != nil {
			return line, err
		}
		repaired(KindDBSnapshot, before.Sold-after.Sold, "snapshot recounted from the orders: sold %d→%d, available %d→%d",
			before.Sold, after.Sold, before.Available, after.Available)
	}
	if !led.Present {
		if r.retired(a, readAt) {
			line.Mode = ModeExpired // the database answers for the sale
			return line, nil
		}
		add(KindRedisMissing, 1, "%s", missingDetail(per))
		return line, nil
	}

	// Redis on its own (one atomic read).
	initDiff := led.Initial - sn.Initial
	add(KindInitial, initDiff, "Redis initial %d, snapshot initial %d", led.Initial, sn.Initial)
	redisLedger := led.Remaining + led.InFlight + led.Sold - led.Initial
	add(KindRedisLedger, redisLedger, "remaining %d + in flight %d + sold %d vs initial %d", led.Remaining, led.InFlight,
		led.Sold, led.Initial)
	oneUnit := k.LimitPerUser <= 1
	if oneUnit {
		d, detail := recordsDrift(led, per)
		add(KindRedisRecords, d, "%s", detail)
	}
	if per != nil {
		d, detail := bucketsDrift(per)
		add(KindBuckets, d, "%s", detail)
	}

	// Records against orders.
	now := readAt
	cutoff := readAt.Add(-orderCutoff)
	var (
		cmpUnits, withRec int64
		lost              []stock.Hold
		release           []ticket
		orphans, stuck    int64
	)
	for rn, o := range live {
		if o.Created.After(cutoff) {
			continue
		}
		cmpUnits += o.Quantity
		if recs.Users[o.UserID] == rn {
			withRec += o.Quantity
		} else {
			lost = append(lost, stock.Hold{UserID: o.UserID, RequestNo: rn, Quantity: o.Quantity})
		}
	}
	for u, rn := range recs.Users {
		if _, ok := live[rn]; ok || pending[rn] {
			continue
		}
		closed, hasOrder := all[rn]
		switch {
		case hasOrder:
			// A closed order whose release is done, yet the record is
			// back (a rebuild from a read older than the close).
			stuck++
			release = append(release, ticket{user: u, rn: rn, qty: closed.Quantity, order: &closed, force: true,
				reason: "record of a closed order"})
		case !r.stale(rn, now, through):
		case recs.Claimed[rn]:
			stuck++
			q, known := recs.UnitsOf(rn, k.LimitPerUser)
			release = append(release, ticket{user: u, rn: rn, qty: q, unknown: !known, force: true,
				reason: "claimed, no order, message consumed"})
		default:
			orphans++
			q, known := recs.UnitsOf(rn, k.LimitPerUser)
			release = append(release, ticket{user: u, rn: rn, qty: q, unknown: !known,
				reason: "orphan: no order, message never came"})
		}
	}
	add(KindOrderWithoutClaim, int64(len(lost)), "%d live orders have no record in Redis", len(lost))
	add(KindClaimedWithoutOrder, stuck, "%d claimed records past the grace period have no live order", stuck)
	add(KindOrphan, orphans, "%d unclaimed records past the grace period have no order", orphans)
	occupied := led.Sold - withRec
	add(KindLedger, cmpUnits+occupied+led.Remaining+led.InFlight-sn.Initial,
		"ordered %d + occupied %d + remaining %d + in flight %d vs initial %d", cmpUnits, occupied, led.Remaining,
		led.InFlight, sn.Initial)
	if err := r.reindex(ctx, a, k, &recs, &line); err != nil {
		return line, err
	}
	if !repair {
		return line, nil
	}

	// Repairs, safest first.
	var restored int64
	if len(lost) > 0 {
		if restored, err = r.stock.RestoreRecords(ctx, a.ID, k, lost); err != nil {
			return line, err
		}
		if restored > 0 {
			repaired(KindOrderWithoutClaim, restored, "restored %d claimed records of live orders (counters unchanged)", restored)
		}
	}
	for _, t := range release {
		if t.unknown {
			continue // the ticket's quantity is known only to its lost message
		}
		ok, err := r.release(ctx, a, k, t)
		if err != nil {
			return line, err
		}
		if ok {
			kind := KindOrphan
			if t.force {
				kind = KindClaimedWithoutOrder
			}
			repaired(kind, t.qty, "released %s of user %d: %s", t.rn, t.user, t.reason)
		}
	}
	if oneUnit && redisLedger == 0 && initDiff == 0 && oversold == 0 && restored == int64(len(lost)) && k.Split() {
		moved, detail, err := r.settleBuckets(ctx, a, k)
		if err != nil {
			return line, err
		}
		if detail != "" {
			repaired(KindRedisRecords, moved, "buckets settled to their records%s", detail)
		}
	} else if oneUnit && redisLedger == 0 && initDiff == 0 && oversold == 0 && restored == int64(len(lost)) {
		fresh, err := r.stock.Ledger(ctx, a.ID, k)
		if err != nil {
			return line, err
		}
		if fresh.Sold != fresh.Holders {
			code, moved, err := r.stock.Settle(ctx, a.ID, k, fresh.Sold)
			if err != nil {
				return line, err
			}
			if code == stock.SettleDone && moved != 0 {
				repaired(KindRedisRecords, moved, "sold %d settled to the %d records: %+d units to remaining",
					fresh.Sold, fresh.Holders, moved)
			}
		}
	}
	return line, nil
}

// reindex puts in the SKU's pending journal every unclaimed record none of
// its entries names (see SKUReport.Reindexed), under its requestNo's time
// (one without a time is never judged stale by the sweeper, so it is left
// out). Tickets an entry names that are claimed or released since are not
// drift: the sweeper drops an entry once all its tickets are. The scan of
// recs is not atomic; reindex.lua judges each ticket again.
func (r *Reconciler) reindex(ctx context.Context, a *sale.Activity, k *sale.SKU, recs *stock.Records, line *SKUReport) error {
	var fix []stock.PendingTicket
	for u, rn := range recs.Users {
		if recs.Claimed[rn] {
			continue
		}
		if _, ok := recs.Pending[stock.PendingMember(u, rn)]; ok {
			continue
		}
		if at, ok := sale.RequestNoTime(rn); ok {
			fix = append(fix, stock.PendingTicket{UserID: u, RequestNo: rn, At: at})
		}
	}
	if len(fix) == 0 {
		return nil
	}
	added, err := r.stock.Reindex(ctx, a.ID, k, fix)
	if err != nil {
		return err
	}
	line.Reindexed = added
	if added > 0 {
		r.log.Info("unclaimed records put in the pending journal", zap.Int64("activityId", a.ID), zap.Int64("skuId", k.ID),
			zap.Int64("added", added))
	}
	return nil
}

// release gives back one ticket's occupancy, answers its buyer and records
// it in the request log. false: nothing was released (claimed meanwhile,
// released already, or the catalog cannot route it).
func (r *Reconciler) release(ctx context.Context, a *sale.Activity, k *sale.SKU, t ticket) (bool, error) {
	cat := r.stock.Catalog()
	if _, _, ok := cat.Lookup(a.ID, k.ID); !ok {
		// Release routes by the catalog; a SKU it does not know would be
		// looked for on the wrong shard.
		return false, nil
	}
	m := sale.Message{RequestNo: t.rn, ActivityID: a.ID, SKUID: k.ID, UserID: t.user, Quantity: t.qty}
	release := r.stock.Release
	if t.order != nil {
		// A closed order's record: its release records the close too.
		release = func(ctx context.Context, m *sale.Message, _ bool) (stock.ReleaseOutcome, error) {
			return r.stock.ReleaseClosed(ctx, m)
		}
	}
	out, err := release(ctx, &m, t.force)
	if err != nil || out != stock.Released {
		return false, err
	}
	// The request log first, the buyer's result last: a buyer (or on-call)
	// who reads FAIL finds the story that explains it.
	var werr error
	if t.order != nil {
		// The request log row keeps its state (the order was made); the
		// history gets the release.
		werr = r.st.AppendEvents(ctx, []store.Event{{RequestNo: t.rn, Status: store.EventStockReleased,
			Remark: "released by the reconciler: " + t.reason}})
	} else {
		entry := store.LogEntry{RequestNo: t.rn, ActivityID: a.ID, SKUID: k.ID, UserID: t.user, Quantity: t.qty,
			Status: store.StatusFailed, Remark: "released by the reconciler: " + t.reason}
		es := []store.LogEntry{entry}
		if at, ok := sale.RequestNoTime(t.rn); ok && !t.force {
			// An orphan has no history yet: its occupancy is the first step.
			occ := entry
			occ.Status, occ.Remark, occ.At = store.StatusStockOccupied, "", at
			es = []store.LogEntry{occ, entry}
		}
		werr = r.st.LogRequests(ctx, es)
	}
	if werr != nil {
		r.log.Warn("released ticket's request log not written", zap.String("requestNo", t.rn), zap.Error(werr))
	}
	res := results.Entry{RequestNo: t.rn, Activity: a.ID, SKU: k.ID, Owner: t.user, State: sale.ResultFail, Code: sale.FailReleased}
	if t.order != nil {
		res.OrderNo, res.Code = sale.OrderNo(t.rn), sale.FailClosed
	}
	if err := r.res.Write(ctx, res); err != nil {
		r.log.Warn("released ticket's result not written", zap.String("requestNo", t.rn), zap.Error(err))
	}
	return true, nil
}

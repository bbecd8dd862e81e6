package reconcile

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"go.uber.org/zap"

	"seckill/sale"
	"seckill/stock"
	"seckill/store"
)

// auditPage is how many orders one read of the incremental audit returns.
const auditPage = 1000

// Line modes (SKUReport.Mode).
const (
	// ModeCounters: the SKU's counters against each other and the
	// database snapshot, and the orders made since the last pass.
	ModeCounters = "counters"
	// ModeFull: every record and claim against every order (Run's).
	ModeFull = "full"
	// ModeExpired: the sale ended, its keys outlived their retention and
	// are gone from Redis; the database answers for it.
	ModeExpired = "expired"
	// ModeAudit: the SKU could not be judged this pass (its warning says
	// why); the line carries only what the audit of its new orders found,
	// and repaired, before that.
	ModeAudit = "audit"
)

// passState is what the periodic pass remembers between two passes
// (runMu).
type passState struct {
	mark      int64              // the id of the last order the incremental audit judged
	audited   map[[2]int64]bool  // ended SKUs compared in full by this process
	behind    map[[2]int64]int64 // SKU -> the order id after which the audit could not check its orders (its shard down)
	expired   map[[2]int64]bool  // SKUs whose keys this process expired (or found expired)
	forgotten map[int64]bool     // activities this process removed from the catalog
	rows      []store.OrderRow   // the audit's page, reused
	holders   []string           // HoldersOf's answer, reused
	users     []int64            // the users of one SKU's group, reused
	bySKU     map[[2]int64][]int // one page's row indexes by SKU, reused
	down      *shardsDown        // this pass's
}

// Pass is the periodic reconciliation (reconcile.interval). Its cost
// follows the change since the last pass, never the size of a sale:
//
//   - each SKU's counters, read atomically from Redis (ledger.lua) and from
//     the database snapshot's row: initial, redis_ledger, redis_records
//     (one unit per ticket), the snapshot against itself (db_snapshot),
//     oversell, ledger (units ordered that Redis's sold does not count)
//     and redis_missing;
//   - the orders made since the last pass, read by the primary key from a
//     watermark a page of auditPage at a time, each live one checked
//     against its buyer's record in Redis (one HMGET per SKU and page):
//     order_without_claim, restored on repair;
//   - once an activity has ended and its last tickets are past the grace
//     period (end + reconcile.orphan_grace), the full comparison of each
//     of its SKUs (Run's), once per process;
//   - once an ended activity's keys have outlived their retention
//     (Config.KeepAfterEnd), the full comparison again and then the
//     expiry of its keys (retire.go).
//
// A SKU that cannot be read (its shard down) does not stop the pass: it
// is a warning of the report and an error of the pass, the other SKUs
// are judged all the same, and the audit's watermark moves on. The audit
// keeps a mark of that SKU's own and checks its orders from there at the
// next pass that can read it (auditNew), so none goes unchecked and no
// full comparison runs during the sale.
//
// Run stays the full comparison of every SKU, for on-call and after the
// sale. The first pass of a process starts its watermark at 0: it pages
// through every order once, in bounded memory.
func (r *Reconciler) Pass(ctx context.Context, repair bool) (Report, error) {
	r.runMu.Lock()
	defer r.runMu.Unlock()
	rep := Report{At: r.now(), Repair: repair}
	fail := func(err error) (Report, error) {
		r.m.runs.WithLabelValues("error").Inc()
		return rep, fmt.Errorf("reconcile pass: %w", err)
	}
	acts, err := r.st.Activities(ctx)
	if err != nil {
		return fail(err)
	}
	r.m.know(acts)
	now := rep.At
	skus := make(map[[2]int64]*skuOf, 8)
	for i := range acts {
		a := &acts[i]
		for j := range a.SKUs {
			skus[[2]int64{a.ID, a.SKUs[j].ID}] = &skuOf{a: a, k: &a.SKUs[j]}
		}
	}
	for key := range r.pass.behind {
		if skus[key] == nil {
			delete(r.pass.behind, key) // its activity is gone
		}
	}
	r.pass.down = r.newShardsDown()
	down := r.pass.down
	if err := r.auditNew(ctx, skus, now, repair); err != nil {
		return fail(err)
	}
	// The full comparisons need the consumer's progress and the closes
	// whose Redis half is pending; read them only when one is due.
	var (
		full    *fullInputs
		held    int
		fullErr error
	)
	inputs := func() (*fullInputs, error) {
		if full == nil && fullErr == nil {
			full, fullErr = r.fullInputs(ctx, &rep)
		}
		return full, fullErr
	}
	// A SKU that cannot be judged (its shard down) is reported and left
	// for the next pass; the others are judged all the same.
	var failed skuErrors
	for i := range acts {
		a := &acts[i]
		var line SKUReport
		retired := 0
		for j := range a.SKUs {
			if ctx.Err() != nil {
				break
			}
			k := &a.SKUs[j]
			key := [2]int64{a.ID, k.ID}
			s := skus[key]
			// notJudged reports k left for the next pass, its shards PINGed
			// so that the SKUs after it on a dead one are skipped at once.
			notJudged := func(err error) {
				failed.add(&rep, a, k, err)
				r.reportAudit(&rep, s)
				down.failed(ctx, a, k, sale.NoBucket)
			}
			if s.err == nil {
				s.err = down.skip(a, k, sale.NoBucket)
			}
			if s.err != nil {
				failed.add(&rep, a, k, s.err)
				r.reportAudit(&rep, s)
				if r.retired(a, now) {
					held++
				}
				continue
			}
			switch {
			case r.retired(a, now):
				in, err := inputs()
				if err != nil {
					return fail(err)
				}
				var ok bool
				if line, ok, err = r.retire(ctx, a, k, in, repair); err != nil {
					notJudged(err)
					held++
					continue
				}
				if ok {
					retired++
				} else {
					held++
				}
			case !r.pass.audited[key] && !now.Before(a.End.Add(r.cfg.OrphanGrace)):
				in, err := inputs()
				if err != nil {
					return fail(err)
				}
				if line, err = r.checkSKU(ctx, a, k, in.through, in.pending, repair); err != nil {
					notJudged(err)
					continue
				}
				r.pass.audited[key] = true
			default:
				if line, err = r.counters(ctx, a, k, now); err != nil {
					notJudged(err)
					continue
				}
			}
			line.Drifts = append(line.Drifts, s.drifts...)
			line.Repairs = append(line.Repairs, s.repairs...)
			r.report(&rep, a, line)
		}
		if retired == len(a.SKUs) && len(a.SKUs) > 0 {
			if err := r.forget(ctx, a); err != nil {
				failed.add(&rep, a, nil, err)
			}
		}
	}
	r.m.held.Set(float64(held))
	sortLines(rep.SKUs)
	if err := failed.err(ctx); err != nil {
		return fail(err)
	}
	r.m.runs.WithLabelValues("ok").Inc()
	if rep.Drifts > 0 {
		r.log.Warn("reconciled with drift", zap.Int("skus", len(rep.SKUs)), zap.Int("drifts", rep.Drifts),
			zap.Int("repairs", rep.Repairs), zap.Bool("repair", repair))
	}
	return rep, nil
}

// skuOf is one SKU of the database's activities and what the incremental
// audit found on it this pass.
type skuOf struct {
	a       *sale.Activity
	k       *sale.SKU
	drifts  []Drift
	repairs []Repair
	err     error // the audit could not check its orders
}

// fullInputs is what a full comparison needs besides the SKU.
type fullInputs struct {
	through    time.Time
	pending    map[string]bool   // requestNos of closes whose Redis half is pending
	pendingSKU map[[2]int64]bool // their SKUs
	// unpaidBefore's read: the oldest order waiting for its payment
	// (zero: none).
	unpaidRead   bool
	oldestUnpaid time.Time
}

func (r *Reconciler) fullInputs(ctx context.Context, rep *Report) (*fullInputs, error) {
	in := &fullInputs{}
	through, err := r.consumedThrough(ctx)
	if err != nil {
		rep.Warnings = append(rep.Warnings, "consumer progress unknown, no occupancy judged stale: "+err.Error())
	} else if !through.IsZero() {
		rep.ConsumedThrough = &through
		in.through = through
	}
	rel, err := r.st.PendingReleases(ctx, 100000)
	if err != nil {
		return nil, err
	}
	in.pending, in.pendingSKU = make(map[string]bool, len(rel)), map[[2]int64]bool{}
	for _, x := range rel {
		in.pending[x.RequestNo] = true
		in.pendingSKU[[2]int64{x.ActivityID, x.SKUID}] = true
	}
	if err := r.stock.Catalog().Load(ctx); err != nil {
		rep.Warnings = append(rep.Warnings, "catalog not loaded: "+err.Error())
	}
	return in, nil
}

// reportAudit reports, for a SKU not judged this pass, what the audit of
// its new orders found and repaired before that (ModeAudit; nothing when it
// found nothing): drifts and repairs already made are not lost with the
// SKU's judgement, and the orders they came from are not audited again.
func (r *Reconciler) reportAudit(rep *Report, s *skuOf) {
	if len(s.drifts)+len(s.repairs) == 0 {
		return
	}
	r.report(rep, s.a, SKUReport{ActivityID: s.a.ID, SKUID: s.k.ID, Mode: ModeAudit,
		Drifts: s.drifts, Repairs: s.repairs})
}

// report adds line to rep: metric, one log line per drift, totals.
func (r *Reconciler) report(rep *Report, a *sale.Activity, line SKUReport) {
	r.m.set(&line)
	for _, d := range line.Drifts {
		r.log.Warn("drift", zap.Int64("activityId", a.ID), zap.Int64("skuId", line.SKUID),
			zap.String("kind", d.Kind), zap.Int64("amount", d.Amount), zap.String("detail", d.Detail))
	}
	rep.Drifts += len(line.Drifts)
	rep.Repairs += len(line.Repairs)
	rep.SKUs = append(rep.SKUs, line)
}

func sortLines(ls []SKUReport) {
	sort.Slice(ls, func(i, j int) bool {
		if ls[i].ActivityID != ls[j].ActivityID {
			return ls[i].ActivityID < ls[j].ActivityID
		}
		return ls[i].SKUID < ls[j].SKUID
	})
}

// counters compares one SKU's counters: O(1) reads on each side.
func (r *Reconciler) counters(ctx context.Context, a *sale.Activity, k *sale.SKU, now time.Time) (SKUReport, error) {
	line := SKUReport{ActivityID: a.ID, SKUID: k.ID, Mode: ModeCounters}
	add := func(kind string, amount int64, format string, args ...any) {
		if amount != 0 {
			line.Drifts = append(line.Drifts, Drift{Kind: kind, Amount: amount, Detail: fmt.Sprintf(format, args...)})
		}
	}
	led, per, err := r.ledgers(ctx, a, k)
	if err != nil {
		return line, err
	}
	line.setRedis(led)
	sn, err := r.st.Snapshot(ctx, a.ID, k.ID)
	if errors.Is(err, store.ErrNotFound) {
		return line, nil // an activity being created: its snapshot comes with its items
	}
	if err != nil {
		return line, err
	}
	line.DB.Initial, line.DB.Available, line.DB.Sold = sn.Initial, sn.Available, sn.Sold
	line.DB.Units = sn.Sold
	add(KindDBSnapshot, sn.Initial-sn.Available-sn.Sold, "snapshot sold %d + available %d vs initial %d",
		sn.Sold, sn.Available, sn.Initial)
	add(KindOversell, max(sn.Sold-sn.Initial, 0), "the snapshot sold %d units of %d", sn.Sold, sn.Initial)
	if !led.Present {
		if r.retired(a, now) {
			line.Mode = ModeExpired
			return line, nil
		}
		add(KindRedisMissing, 1, "%s", missingDetail(per))
		return line, nil
	}
	add(KindInitial, led.Initial-sn.Initial, "Redis initial %d, snapshot initial %d", led.Initial, sn.Initial)
	add(KindRedisLedger, led.Remaining+led.InFlight+led.Sold-led.Initial, "remaining %d + in flight %d + sold %d vs initial %d",
		led.Remaining, led.InFlight, led.Sold, led.Initial)
	if k.LimitPerUser <= 1 {
		d, detail := recordsDrift(led, per)
		add(KindRedisRecords, d, "%s", detail)
	}
	if per != nil {
		d, detail := bucketsDrift(per)
		add(KindBuckets, d, "%s", detail)
	}
	// Every ordered unit was occupied first and stays counted in Redis's
	// sold until its order closes (the database first): units the
	// snapshot sold above Redis's sold are orders Redis lost.
	add(KindLedger, max(sn.Sold-led.Sold, 0), "the snapshot sold %d units, Redis counts %d", sn.Sold, led.Sold)
	return line, nil
}

// auditNew checks the orders made since the watermark against their
// buyers' records, page by page: a live order older than orderCutoff
// whose buyer's record does not name it is order_without_claim (restored
// on repair). The watermark stops before the first order younger than the
// cutoff (its transaction's neighbours may still commit below it), so the
// next pass starts there.
//
// A SKU whose records cannot be read (its shard down) does not hold the
// watermark back for the others: it keeps a mark of its own (passState's
// behind, the watermark before the first page it missed), is skipped for
// the rest of the pass (each read of a dead shard takes seconds), and is
// audited again from that mark, first thing, by every later pass until one
// gets through.
func (r *Reconciler) auditNew(ctx context.Context, skus map[[2]int64]*skuOf, now time.Time, repair bool) error {
	p := &r.pass
	if err := r.auditBehind(ctx, skus, repair); err != nil {
		return err
	}
	cutoff := now.Add(-orderCutoff)
	for {
		rows, err := r.st.OrdersAfter(ctx, p.mark, auditPage, p.rows[:0])
		p.rows = rows
		if err != nil {
			return err
		}
		n := len(rows)
		for i := range rows {
			if rows[i].Created.After(cutoff) {
				n = i
				break
			}
		}
		if err := r.auditPageOf(ctx, skus, rows[:n], p.mark, nil, repair); err != nil {
			return err
		}
		if n > 0 {
			p.mark = rows[n-1].ID
		}
		if n < auditPage {
			return nil
		}
	}
}

// auditBehind audits again the orders of the SKUs behind, from the lowest
// of their marks up to the watermark, each SKU's from its own mark. A SKU
// that gets through leaves behind.
func (r *Reconciler) auditBehind(ctx context.Context, skus map[[2]int64]*skuOf, repair bool) error {
	p := &r.pass
	if len(p.behind) == 0 {
		return nil
	}
	from := p.mark
	for _, m := range p.behind {
		from = min(from, m)
	}
	for from < p.mark {
		rows, err := r.st.OrdersAfter(ctx, from, auditPage, p.rows[:0])
		p.rows = rows
		if err != nil {
			return err
		}
		n := len(rows)
		for i := range rows {
			if rows[i].ID > p.mark {
				n = i
				break
			}
		}
		if err := r.auditPageOf(ctx, skus, rows[:n], from, p.behind, repair); err != nil {
			return err
		}
		if n < auditPage {
			break
		}
		from = rows[n-1].ID
	}
	for key := range p.behind {
		if s := skus[key]; s != nil && s.err == nil {
			delete(p.behind, key)
		}
	}
	return nil
}

// auditPageOf audits one page of orders (read after the order id after),
// SKU by SKU: only the SKUs of only (nil: every SKU), each only above its
// mark there, and none that failed already this pass. A SKU whose records
// cannot be read gets its error and, unless it is behind already, the
// mark after.
func (r *Reconciler) auditPageOf(ctx context.Context, skus map[[2]int64]*skuOf, rows []store.OrderRow, after int64, only map[[2]int64]int64, repair bool) error {
	p := &r.pass
	clear(p.bySKU)
	for i := range rows {
		o := &rows[i]
		if !o.Live() {
			continue
		}
		key := [2]int64{o.ActivityID, o.SKUID}
		s := skus[key]
		if s == nil || s.err != nil {
			continue
		}
		if only != nil {
			if m, ok := only[key]; !ok || o.ID <= m {
				continue
			}
		}
		p.bySKU[key] = append(p.bySKU[key], i)
	}
	for key, idx := range p.bySKU {
		s := skus[key]
		err := p.down.skip(s.a, s.k, sale.NoBucket)
		if err == nil {
			if err = r.auditGroup(ctx, s, rows, idx, repair); err != nil {
				if ctx.Err() != nil {
					return err
				}
				p.down.failed(ctx, s.a, s.k, sale.NoBucket)
			}
		}
		if err != nil {
			s.err = err
			if _, ok := p.behind[key]; !ok {
				p.behind[key] = after
			}
		}
	}
	return nil
}

// auditGroup checks one page's live orders of one SKU.
func (r *Reconciler) auditGroup(ctx context.Context, s *skuOf, rows []store.OrderRow, idx []int, repair bool) error {
	p := &r.pass
	p.users = p.users[:0]
	for _, i := range idx {
		p.users = append(p.users, rows[i].UserID)
	}
	hs, err := r.stock.HoldersOf(ctx, s.a.ID, s.k, p.users, p.holders)
	p.holders = hs
	if err != nil {
		return err
	}
	var (
		lost    []stock.Hold
		present *bool
	)
	for j, i := range idx {
		o := &rows[i].OrderRef
		if hs[j] == o.RequestNo {
			continue
		}
		if present == nil {
			// A SKU Redis lost whole is the watcher's (redis_missing),
			// not one drift per order.
			led, err := r.stock.Ledger(ctx, s.a.ID, s.k)
			if err != nil {
				return err
			}
			present = &led.Present
		}
		if !*present {
			return nil
		}
		// An order closed since the page was read gave its record back
		// (the close is written to the database first): read it again.
		cur, err := r.st.OrderByRequest(ctx, o.RequestNo)
		if errors.Is(err, store.ErrNotFound) || err == nil && cur.Status == store.OrderClosed {
			continue
		}
		if err != nil {
			return err
		}
		lost = append(lost, stock.Hold{UserID: o.UserID, RequestNo: o.RequestNo, Quantity: o.Quantity})
	}
	if len(lost) == 0 {
		return nil
	}
	s.drifts = append(s.drifts, Drift{Kind: KindOrderWithoutClaim, Amount: int64(len(lost)),
		Detail: fmt.Sprintf("%d orders made since the last pass have no record in Redis", len(lost))})
	if !repair {
		return nil
	}
	restored, err := r.stock.RestoreRecords(ctx, s.a.ID, s.k, lost)
	if err != nil {
		return err
	}
	if restored > 0 {
		s.repairs = append(s.repairs, Repair{Kind: KindOrderWithoutClaim, Amount: restored,
			Detail: fmt.Sprintf("restored %d claimed records of live orders (counters unchanged)", restored)})
		r.m.repairs.WithLabelValues(KindOrderWithoutClaim).Inc()
		r.log.Warn("repaired", zap.Int64("activityId", s.a.ID), zap.Int64("skuId", s.k.ID),
			zap.String("kind", KindOrderWithoutClaim), zap.Int64("amount", restored))
	}
	return nil
}

package chaos

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The invariant checker. judge is a pure function of what was read (the
// crowd's answers, the books, the admin API's two reports, the process
// logs) and of what the scenario declared (stock, fault, Redis loss): the
// self-test (checker_test.go) feeds it hand-built states and shows that
// each verdict can fail.

// verdict is one invariant's outcome.
type verdict struct {
	Name   string
	OK     bool
	Detail string
}

// report is the outcome of a check.
type report struct {
	Verdicts []verdict
	Notes    []string
	Orders   int64
	Stock    map[int64]int64
	Held     int64 // occupancies without an order at quiescence
}

func (r *report) add(name string, ok bool, format string, args ...any) {
	r.Verdicts = append(r.Verdicts, verdict{Name: name, OK: ok, Detail: fmt.Sprintf(format, args...)})
}

func (r *report) note(format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}

func (r *report) ok() bool { return len(r.failed()) == 0 }

func (r *report) failed() []string {
	var out []string
	for _, v := range r.Verdicts {
		if !v.OK {
			out = append(out, v.Name)
		}
	}
	return out
}

// Verdict names (the self-test asks for them by name).
const (
	vLedger      = "orders + live occupancies + Redis stock == initial"
	vRedisLedger = "Redis stock + sold == initial"
	vSnapshot    = "orders <= initial, snapshot agrees"
	vOneOrder    = "at most one order per user"
	vNoHeld      = "no stock held without an order (orphan sweeper)"
	vFinal       = "every accepted ticket reached SUCCESS or FAIL"
	vResultKept  = "every accepted ticket kept its result (unless a declared Redis loss took it)"
	vAckedOK     = "every acknowledged ticket ended SUCCESS (FAIL only where a declared Redis loss or dead-lettering explains it)"
	vAnswers     = "answers match the orders"
	vTwice       = "no buyer told SUCCESS for two orders of one SKU"
	vReleased    = "every FAIL released its occupancy"
	vNoQueuing   = "no result key still QUEUING once idle"
	vNoWaiting   = "no result key still WAITING once idle (queue mode)"
	vWaitFinal   = "every ticket answered 202 WAITING or named by a 409 WAITING reached SUCCESS, or FAIL with the ledger's reason"
	vWaitOnce    = "no waiting ticket served twice: none ended FAIL holding its own order or occupancy, SUCCESS names its own order"
	vWaitNamed   = "a 409 WAITING named a ticket of that buyer and SKU, and the buyer got at most one order"
	vLineEnded   = "every attempt in the attempts topic ended SUCCESS or FAIL (no attempt lost)"
	vNoOpenLog   = "no request-log row still on its way once idle"
	vAdminStock  = "admin stock report agrees with the books (second opinion)"
	vRecon       = "reconciler answers 200 with zero drift (second opinion)"
	vReconCounts = "reconciler counts what the checker counts"
	vRaces       = "no process reported a data race"
	vHit         = "the fault hit a sale in progress"
	vBefore      = "before the fault: only healthy answers"
	vDuring      = "while the fault lasted: only the answers it allows"
	vAfter       = "after the fault healed: only the answers it allows"
	vResumed     = "sales resumed after the fault healed"
	vAllowed     = "only the answers the scenario allows"
)

func skuVerdict(sku int64, name string) string { return fmt.Sprintf("sku %d: %s", sku, name) }

// adminAnswer is one answer of the admin API.
type adminAnswer struct {
	Status int
	Body   []byte
	Err    error
}

// evidence is everything the checker read.
type evidence struct {
	Run   *Run
	Books *books
	Stock adminAnswer // GET /admin/v1/activities/{id}/stock
	Recon adminAnswer // POST /admin/v1/reconcile
	Races []string    // data race reports in the processes' logs
}

// expectations is what the scenario declared.
type expectations struct {
	SKUs    map[int64]int64 // initial stock per SKU
	Sweeper bool            // the code releases orphans: none may be left
	Store   bool            // a store is configured: the reconciler must answer
	Extra   []verdict       // the scenario's own conditions
}

// lossStories are the request-log remarks that say a Redis loss failed a
// ticket, with the result code that goes with each: the consumer came to
// claim the ticket and its record was gone (the emptied Redis lost it), or
// the database's snapshot refused the unit.
var lossStories = []struct{ remark, code, why string }{
	{"occupancy released before the order was made", failReleased, "its record was gone when the consumer came to claim it"},
	{"sold out in the database snapshot", failSoldOut, "the database's snapshot had no unit left for it"},
}

// judge checks every invariant of DESIGN §8 and of the scenario on ev.
func judge(ev evidence, ex expectations) *report {
	rep := &report{Stock: map[int64]int64{}}
	rep.Verdicts = append(rep.Verdicts, ex.Extra...)
	b, run := ev.Books, ev.Run
	liveByRN, liveByNo := b.liveOrders()
	judgeLedger(rep, b, ex)
	judgeTickets(rep, run, b, liveByRN, liveByNo)
	judgeWaiting(rep, run, b, liveByRN, liveByNo)

	judgeIdle(rep, b, run)

	accepted := 0
	for rn := range liveByRN {
		_, ok := run.Tickets[rn]
		_, waited := run.Waiting[rn]
		if _, named := run.Named[rn]; ok || waited || named {
			accepted++
		}
	}
	if n := len(liveByRN) - accepted; n > 0 {
		rep.note("%d orders belong to attempts not answered 200 or 202 (the answer was lost: a crash, or a 503 after a send that reached Kafka after all)", n)
	}

	judgeAnswers(rep, run, b, ex)
	judgeAdminStock(rep, ev.Stock, b, ex)
	judgeReconcile(rep, ev.Recon, b, ex)
	rep.add(vRaces, len(ev.Races) == 0, "%d reports %v", len(ev.Races), head(ev.Races, 2))
	return rep
}

// judgeLedger checks each SKU's books: the ledger adds up in Redis and in
// the database, the snapshot agrees, one live order per user, and (with
// the orphan sweeper) no stock held without an order.
func judgeLedger(rep *report, b *books, ex expectations) {
	occupied := b.occupied()
	ids := make([]int64, 0, len(ex.SKUs))
	for id := range ex.SKUs {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })

	// Per SKU: the ledger, counted here from Redis and the database.
	for _, id := range ids {
		initial := ex.SKUs[id]
		sb := b.SKUs[id]
		if sb == nil {
			rep.add(skuVerdict(id, vLedger), false, "the books have no sku %d", id)
			continue
		}
		rep.Orders += sb.LiveUnits
		rep.Stock[id] = sb.Stock
		occ := occupied[id]
		rep.Held += occ
		sum := sb.LiveUnits + occ + sb.Stock
		rep.add(skuVerdict(id, vLedger), sum == initial && sb.StockKey,
			"%d order units + %d occupied + %d in Redis = %d, initial %d (stock key present: %v)",
			sb.LiveUnits, occ, sb.Stock, sum, initial, sb.StockKey)
		rep.add(skuVerdict(id, vRedisLedger), sb.Stock+sb.Sold == initial && sb.Stock >= 0 && sb.MetaInitial == initial,
			"stock %d + sold %d = %d, initial %d (meta says %d)", sb.Stock, sb.Sold, sb.Stock+sb.Sold, initial, sb.MetaInitial)
		rep.add(skuVerdict(id, vSnapshot),
			sb.LiveUnits <= initial && sb.SnapFound && sb.SnapAvail >= 0 && sb.SnapInitial == initial &&
				sb.SnapInitial-sb.SnapAvail == sb.LiveUnits && sb.SnapSold == sb.LiveUnits,
			"%d order units of %d; snapshot found %v: initial %d available %d sold %d",
			sb.LiveUnits, initial, sb.SnapFound, sb.SnapInitial, sb.SnapAvail, sb.SnapSold)
		perUser := map[int64]int{}
		var dups []string
		for _, o := range sb.Orders {
			if o.Status == orderClosed {
				continue
			}
			if perUser[o.User]++; perUser[o.User] == 2 {
				dups = append(dups, strconv.FormatInt(o.User, 10))
			}
		}
		rep.add(skuVerdict(id, vOneOrder), len(dups) == 0,
			"%d orders, %d users with more than one live order (%v)", len(sb.Orders), len(dups), head(dups, 5))
		if ex.Sweeper {
			rep.add(skuVerdict(id, vNoHeld), occ == 0, "%d occupancies without an order at quiescence", occ)
		} else if occ > 0 {
			rep.note("sku %d: %d occupancies hold stock without an order (this build has no orphan sweeper)", id, occ)
		}
	}
}

// judgeIdle checks what must be true once the sale is quiet: no result
// still QUEUING, no request-log story left open (but those a declared
// Redis loss froze, which are noted).
func judgeIdle(rep *report, b *books, run *Run) {
	queuing := b.queuing()
	rep.add(vNoQueuing, len(queuing) == 0, "%d result keys QUEUING %v", len(queuing), head(queuing, 5))
	if waiting := b.inState(stateWaiting); len(waiting) > 0 || len(run.Waiting) > 0 {
		rep.add(vNoWaiting, len(waiting) == 0, "%d result keys WAITING %v", len(waiting), head(waiting, 5))
	}
	open, frozen := b.openLog(run)
	rep.add(vNoOpenLog, len(open) == 0, "%d of %d request-log rows not SUCCESS, FAILED or REJECTED %v",
		len(open), len(b.Log), head(open, 5))
	if len(frozen) > 0 {
		rep.note("PRODUCT GAP: %d request-log rows stay COMPENSATING for good — their occupancy went with the declared Redis loss, "+
			"so nobody writes their FAILED (the buyers got 503): %v", len(frozen), head(frozen, 5))
	}
}

// judgeTickets: every accepted ticket ended, its answer matches the
// database, and an acknowledged ticket ended SUCCESS unless a declared
// Redis loss explains its FAIL.
func judgeTickets(rep *report, run *Run, b *books, liveByRN, liveByNo map[string]order) {
	var (
		stuck, lostResult, unexplained, explained, lies, unreleased, twice []string
		toldOrder                                                          = map[[2]int64]string{}
		existing, fromDB                                                   int
	)
	var loss *redisLoss
	var dl *deadLettering
	if run.Fault != nil {
		loss, dl = run.Fault.Loss, run.Fault.DeadLetters
	}
	rns := make([]string, 0, len(run.Tickets))
	for rn := range run.Tickets {
		rns = append(rns, rn)
	}
	sort.Strings(rns)
	for _, rn := range rns {
		tk := run.Tickets[rn]
		res := b.Results[rn]
		l, logged := b.Log[rn]
		state, orderNo := res[fieldState], res[fieldOrderNo]
		if res == nil {
			// The result is gone. Only a declared loss of the shard of
			// the ticket's SKU, where its result lives, may take it, for
			// a ticket answered before it healed; the database then
			// tells the fate.
			if !loss.covers(tk.SKU) || tk.Answered.After(loss.Until) {
				lostResult = append(lostResult, fmt.Sprintf("%s(user %d sku %d)", rn, tk.User, tk.SKU))
			}
			switch o, live := liveByRN[rn]; {
			case live:
				state, orderNo = stateSuccess, o.OrderNo
				fromDB++
			case logged && l.Status == "FAILED":
				state = stateFail
				fromDB++
			}
		}
		switch state {
		case stateSuccess:
			// SUCCESS names a live order of this buyer and SKU: the
			// ticket's own, or (DESIGN §7: a duplicate is "already done")
			// the order the buyer already had.
			o, ok := liveByNo[orderNo]
			switch {
			case !ok:
				lies = append(lies, fmt.Sprintf("%s: SUCCESS names order %q, which is not a live order", rn, orderNo))
			case o.User != tk.User || o.SKU != tk.SKU:
				lies = append(lies, fmt.Sprintf("%s: SUCCESS names order %q of user %d sku %d", rn, orderNo, o.User, o.SKU))
			case o.RequestNo != rn:
				existing++
			}
			k := [2]int64{tk.User, tk.SKU}
			if prev, ok := toldOrder[k]; ok && prev != orderNo {
				twice = append(twice, fmt.Sprintf("user %d sku %d: %s and %s", tk.User, tk.SKU, prev, orderNo))
			}
			toldOrder[k] = orderNo
		case stateFail:
			if _, live := liveByRN[rn]; live {
				lies = append(lies, rn+": FAIL but its order is live")
			}
			if sb := b.SKUs[tk.SKU]; sb != nil && (sb.Users[strconv.FormatInt(tk.User, 10)] == rn || sb.Claimed[rn]) {
				unreleased = append(unreleased, rn)
			}
			if ok, why := lossExplains(loss, tk, res, l, logged); ok {
				explained = append(explained, why)
			} else if ok, dwhy := deadLetterExplains(dl, tk, res, l, logged); ok {
				explained = append(explained, dwhy)
			} else {
				unexplained = append(unexplained, why+"; "+dwhy)
			}
		default:
			stuck = append(stuck, fmt.Sprintf("%s(user %d sku %d: result %q, log %q)", rn, tk.User, tk.SKU, state, l.Status))
		}
	}
	if existing > 0 {
		rep.note("%d tickets were answered SUCCESS with the order their buyer already had (duplicate = already done)", existing)
	}
	if fromDB > 0 {
		rep.note("%d accepted tickets lost their result with Redis; their fate came from the database", fromDB)
	}
	if len(explained) > 0 {
		rep.note("%d acknowledged tickets ended FAIL, each explained by the declared fault: %v", len(explained), head(explained, 5))
	}
	rep.add(vFinal, len(stuck) == 0, "%d accepted, %d without a final answer %v", len(run.Tickets), len(stuck), head(stuck, 5))
	rep.add(vResultKept, len(lostResult) == 0, "%d results missing %v", len(lostResult), head(lostResult, 5))
	rep.add(vAckedOK, len(unexplained) == 0, "%d acknowledged tickets ended FAIL without a declared Redis loss or dead-lettering that explains it %v",
		len(unexplained), head(unexplained, 5))
	rep.add(vAnswers, len(lies) == 0, "%d mismatches %v", len(lies), head(lies, 5))
	rep.add(vTwice, len(twice) == 0, "%d buyers %v", len(twice), head(twice, 5))
	rep.add(vReleased, len(unreleased) == 0,
		"%d FAIL tickets still hold a user record or a claim %v", len(unreleased), head(unreleased, 5))
}

// judgeWaiting: queue mode's tickets (DESIGN §13). Every attempt answered
// 202 WAITING — durable in the attempts topic — and every ticket a 409
// WAITING named ends: SUCCESS naming its own live order (a drained attempt
// occupies under its own ticket number), or FAIL with the reason the
// ledger gave (SOLD_OUT, DUPLICATE, …; RELEASED by the orphan sweeper
// after a drainer died between occupy and order message) — never BUSY
// (the line retries a busy shard or broker, it never gives up on a
// durable attempt) nor RATE_LIMITED (a drained attempt is not counted in
// the buyer's window) and never a FAIL that holds its own order or
// occupancy: that is an attempt served twice, a later delivery's verdict
// over the first one's. The line's order is not judged here (faults
// reorder it: a retried attempt loses its place). A buyer told 409
// WAITING was told of a ticket of their own, and holds at most one order
// of the SKU. Without waiting tickets nothing is reported.
func judgeWaiting(rep *report, run *Run, b *books, liveByRN, liveByNo map[string]order) {
	if len(run.Waiting) == 0 && len(run.Named) == 0 {
		return
	}
	var loss *redisLoss
	if run.Fault != nil {
		loss = run.Fault.Loss
	}
	all := map[string]ticket{}
	for rn, tk := range run.Named {
		all[rn] = tk
	}
	for rn, tk := range run.Waiting {
		all[rn] = tk // the 202's buyer and time over a 409's
	}
	rns := make([]string, 0, len(all))
	for rn := range all {
		rns = append(rns, rn)
	}
	sort.Strings(rns)
	var stuck, twice, named, ghosts []string
	outcomes := map[string]int{}
	for _, rn := range rns {
		tk := all[rn]
		res := b.Results[rn]
		o, live := liveByRN[rn]
		state, code := res[fieldState], res[fieldCode]
		_, answered := run.Waiting[rn]
		_, inLine := b.Attempts[rn]
		if b.Attempts != nil && !inLine {
			switch {
			case answered:
				stuck = append(stuck, fmt.Sprintf("%s(user %d sku %d): answered 202 WAITING, but in no line", rn, tk.User, tk.SKU))
				continue
			case res == nil && !live && ghostAllowed(run, tk):
				ghosts = append(ghosts, fmt.Sprintf("%s(user %d sku %d, told at %s)", rn, tk.User, tk.SKU, tk.Answered.Format("15:04:05.000")))
				continue
			}
		}
		if res == nil && loss.covers(tk.SKU) && !tk.Answered.After(loss.Until) {
			// Its result went with a declared loss of its shard: the
			// database tells the fate.
			if l, ok := b.Log[rn]; live || ok && l.Status == "FAILED" {
				state, code = stateFail, "from the request log"
				if live {
					state, res = stateSuccess, map[string]string{fieldOrderNo: o.OrderNo}
				}
			}
		}
		if state == stateFail {
			outcomes[state+" "+code]++
		} else {
			outcomes[state]++
		}
		switch state {
		case stateSuccess:
			if on := res[fieldOrderNo]; !live || on != o.OrderNo || liveByNo[on].User != tk.User || liveByNo[on].SKU != tk.SKU {
				twice = append(twice, fmt.Sprintf("%s(user %d sku %d): SUCCESS names order %q, its own live order is %q", rn, tk.User, tk.SKU, on, o.OrderNo))
			}
		case stateFail:
			sb := b.SKUs[tk.SKU]
			holds := sb != nil && (sb.Users[strconv.FormatInt(tk.User, 10)] == rn || sb.Claimed[rn])
			switch {
			case live || holds:
				twice = append(twice, fmt.Sprintf("%s(user %d sku %d): FAIL %s, yet its order is live (%v) or it holds its occupancy (%v)",
					rn, tk.User, tk.SKU, code, live, holds))
			case code == "" || (code == "BUSY" || code == "RATE_LIMITED") && answered:
				// BUSY ends only a ticket no buyer was told WAITING
				// for: its Append died and the line took the orphan's
				// record back. RATE_LIMITED would be the line's own
				// retries spending the buyer's window.
				stuck = append(stuck, fmt.Sprintf("%s(user %d sku %d): FAIL %q, not a verdict of the ledger", rn, tk.User, tk.SKU, code))
			}
		default:
			stuck = append(stuck, fmt.Sprintf("%s(user %d sku %d): result %q", rn, tk.User, tk.SKU, state))
		}
	}
	for rn, tk := range run.Named {
		if owner := b.Results[rn][fieldOwner]; owner != "" && owner != strconv.FormatInt(tk.User, 10) {
			named = append(named, fmt.Sprintf("user %d was told of %s, a ticket of user %s", tk.User, rn, owner))
		}
		if _, sku, _, ok := parseRequestNo(rn); ok && sku != tk.SKU {
			named = append(named, fmt.Sprintf("user %d was told of %s, a ticket of sku %d, buying sku %d", tk.User, rn, sku, tk.SKU))
		}
		n := 0
		if sb := b.SKUs[tk.SKU]; sb != nil {
			for _, o := range sb.Orders {
				if o.Status != orderClosed && o.User == tk.User {
					n++
				}
			}
		}
		if n > 1 {
			named = append(named, fmt.Sprintf("user %d, told of %s, holds %d live orders of sku %d", tk.User, rn, n, tk.SKU))
		}
	}
	sort.Strings(named)
	if len(ghosts) > 0 {
		rep.note("%d tickets named by a 409 WAITING while the fault lasted are in no line and have no result: an edge died between "+
			"their buyer's waiting record and the attempt (the buyer's next attempt replaces the record) %v", len(ghosts), head(ghosts, 5))
	}
	if b.Attempts != nil {
		var lost []string
		dups := 0
		for rn, a := range b.Attempts {
			if a.Records > 1 {
				dups++
			}
			if st := b.Results[rn][fieldState]; st != stateSuccess && st != stateFail {
				lost = append(lost, fmt.Sprintf("%s(user %d sku %d): result %q", rn, a.User, a.SKU, st))
			}
		}
		sort.Strings(lost)
		if dups > 0 {
			rep.note("%d attempts are in the attempts topic more than once (a producer's retry); each was served once", dups)
		}
		rep.add(vLineEnded, len(lost) == 0, "%d attempts in the topic, %d not ended %v", len(b.Attempts), len(lost), head(lost, 5))
	}
	rep.add(vWaitFinal, len(stuck) == 0, "%d waiting tickets (%d answered 202, %d named by a 409): %v; %d not ended %v",
		len(all), len(run.Waiting), len(run.Named), outcomes, len(stuck), head(stuck, 5))
	rep.add(vWaitOnce, len(twice) == 0, "%d served twice %v", len(twice), head(twice, 5))
	rep.add(vWaitNamed, len(named) == 0, "%d of %d 409 WAITING answers wrong %v", len(named), len(run.Named), head(named, 5))
}

// ghostGrace is how long after a fault struck a 409 WAITING may name a
// ticket that is in no line: an edge killed between a buyer's waiting
// record and the attempt leaves the record, which the buyer's next
// attempt replaces once no Append can be on its way any more (twice
// engine.kafka.send_timeout, 3 s).
const ghostGrace = 10 * time.Second

// ghostAllowed says whether tk, named by a 409 WAITING and in no line, was
// told while a fault could have left its record behind.
func ghostAllowed(run *Run, tk ticket) bool {
	f := run.Fault
	return f != nil && !tk.Answered.Before(f.Injected) && tk.Answered.Before(f.Injected.Add(ghostGrace))
}

// parseRequestNo reads "<activity>-<sku>-<id>" (README "Numbers"; a
// bucketed SKU's "<sku>.<bucket>").
func parseRequestNo(rn string) (activity, sku int64, id string, ok bool) {
	parts := strings.SplitN(rn, "-", 3)
	if len(parts) != 3 {
		return 0, 0, "", false
	}
	a, err1 := strconv.ParseInt(parts[0], 10, 64)
	ks, _, _ := strings.Cut(parts[1], ".")
	k, err2 := strconv.ParseInt(ks, 10, 64)
	return a, k, parts[2], err1 == nil && err2 == nil
}

// lossExplains says whether the declared loss explains the FAIL of the
// acknowledged ticket tk, and if not, tells its story: the loss must cover
// the ticket's SKU, the ticket must have been answered before the emptied
// Redis came back, and its request-log row must say the loss failed it (a
// FAILED row with one of lossStories' remarks, and, where the result is
// kept, the matching code).
func lossExplains(loss *redisLoss, tk ticket, res map[string]string, l logRow, logged bool) (bool, string) {
	story := fmt.Sprintf("%s(user %d sku %d, answered %s: result %s %s, log %q %q)", tk.RequestNo, tk.User, tk.SKU,
		tk.Answered.Format("15:04:05.000"), res[fieldState], res[fieldCode], l.Status, l.Remark)
	switch {
	case loss == nil:
		return false, story + ": no Redis loss declared"
	case !loss.covers(tk.SKU):
		return false, story + ": the declared Redis loss is not of this SKU"
	case tk.Answered.After(loss.Until):
		return false, story + fmt.Sprintf(": answered after the emptied Redis came back (%s)", loss.Until.Format("15:04:05.000"))
	case !logged || l.Status != "FAILED":
		return false, story + ": the request log does not say it FAILED"
	}
	for _, s := range lossStories {
		if strings.HasPrefix(l.Remark, s.remark) && (res == nil || res[fieldCode] == s.code) {
			return true, story + ": " + s.why
		}
	}
	return false, story + ": its story is not one a Redis loss tells"
}

// deadLetterStory is the request-log remark of a ticket the orphan sweeper
// ended because its message was dead-lettered (reconcile.orphanReason).
const deadLetterStory = "released by the reconciler: orphan: no order, its message was dead-lettered"

// deadLetterExplains says whether declared dead-lettering explains the
// FAIL of acknowledged ticket tk: answered before the consumer could
// verify again, released by the sweeper (FAIL RELEASED) with a story that
// names the dead letter. That it holds no stock any more is vReleased's.
func deadLetterExplains(dl *deadLettering, tk ticket, res map[string]string, l logRow, logged bool) (bool, string) {
	story := fmt.Sprintf("%s(result %s %s, log %q %q)", tk.RequestNo, res[fieldState], res[fieldCode], l.Status, l.Remark)
	switch {
	case dl == nil:
		return false, story + ": no dead-lettering declared"
	case tk.Answered.After(dl.Until):
		return false, story + fmt.Sprintf(": answered after the consumer could verify again (%s)", dl.Until.Format("15:04:05.000"))
	case !logged || l.Status != "FAILED" || !strings.HasPrefix(l.Remark, deadLetterStory):
		return false, story + ": its story does not name a dead letter"
	case res != nil && res[fieldCode] != failReleased:
		return false, story + ": not released by the sweeper"
	}
	return true, story + ": its message was dead-lettered and the sweeper ended it"
}

// judgeAnswers: the crowd got only the answers the scenario allows —
// healthy ones before the fault, the fault's own while it lasted, and
// after it healed and settled; and sales resumed then.
func judgeAnswers(rep *report, run *Run, b *books, ex expectations) {
	f := run.Fault
	if f == nil {
		if run.Allowed != nil {
			var bad []string
			for i := range run.Attempts {
				if a := &run.Attempts[i]; !run.Allowed[a.answer()] {
					bad = append(bad, fmt.Sprintf("user %d sku %d: %s", a.User, a.SKU, a.answer()))
				}
			}
			rep.add(vAllowed, len(bad) == 0, "%d of %d answers outside %v %v", len(bad), len(run.Attempts), run.Allowed, head(bad, 5))
		}
		return
	}
	var (
		bad      [3][]string
		seen     [3]map[string]int
		accepted [3]int
		sent     [3]int
	)
	for p := range seen {
		seen[p] = map[string]int{}
	}
	for i := range run.Attempts {
		a := &run.Attempts[i]
		p := f.phase(a)
		sent[p]++
		seen[p][a.answer()]++
		if a.taken() {
			accepted[p]++
		}
		if !f.allowed(p, a.SKU)[a.answer()] {
			bad[p] = append(bad[p], fmt.Sprintf("user %d sku %d sent %+.2fs after the injection: %s %s",
				a.User, a.SKU, a.Sent.Sub(f.Injected).Seconds(), a.answer(), a.Err))
		}
	}
	total := int64(0)
	for _, n := range ex.SKUs {
		total += n
	}
	rep.add(vHit, accepted[phaseBefore] > 0 && int64(accepted[phaseBefore]) < total,
		"%d accepted before the fault, %d units on sale", accepted[phaseBefore], total)
	for p, name := range [...]string{phaseBefore: vBefore, phaseDuring: vDuring, phaseAfter: vAfter} {
		p := phase(p)
		allowed := f.allowed(p, 0)
		if p == phaseDuring && len(f.DuringSKU) > 0 {
			allowed = nil
		}
		desc := fmt.Sprintf("%d sent, answers %v", sent[p], seen[p])
		if allowed != nil {
			desc += fmt.Sprintf(", allowed %v", allowed)
		} else {
			desc += fmt.Sprintf(", allowed %v (per SKU: %v)", f.During, f.DuringSKU)
		}
		rep.add(name, len(bad[p]) == 0, "%s; %d outside %v", desc, len(bad[p]), head(bad[p], 5))
	}
	resumed, how := accepted[phaseAfter] > 0, ""
	if !resumed && sent[phaseAfter] > 0 && len(f.LineServed) > 0 {
		resumed, how = lineSpokeForTheStock(run, b, ex)
	}
	rep.add(vResumed, resumed,
		"%d of %d attempts sent after the fault healed (%s) and settled (+%v) were accepted%s",
		accepted[phaseAfter], sent[phaseAfter], f.Healed.Format("15:04:05.000"), f.Settle, how)
}

// lineSpokeForTheStock says whether sales resumed although no attempt sent
// after the fault settled took a place: every SKU those attempts were for
// served, after the heal, a ticket WAITING at the heal (faultRun's
// LineServed), and ended with its whole stock in live orders — its 410s
// were true: the line had spoken for the stock before the fault settled.
func lineSpokeForTheStock(run *Run, b *books, ex expectations) (bool, string) {
	f := run.Fault
	skus := map[int64]bool{}
	for i := range run.Attempts {
		if a := &run.Attempts[i]; f.phase(a) == phaseAfter {
			skus[a.SKU] = true
		}
	}
	var bad []string
	for sku := range skus {
		sb := b.SKUs[sku]
		switch {
		case !f.LineServed[sku]:
			bad = append(bad, fmt.Sprintf("sku %d: its line served no ticket after the heal", sku))
		case sb == nil || sb.LiveUnits != ex.SKUs[sku]:
			live := int64(-1)
			if sb != nil {
				live = sb.LiveUnits
			}
			bad = append(bad, fmt.Sprintf("sku %d: %d of %d units in orders, so its answers after the fault were not all true", sku, live, ex.SKUs[sku]))
		}
	}
	if len(bad) > 0 {
		return false, "; none could be by the line either: " + strings.Join(bad, "; ")
	}
	return true, "; none could be: each SKU's line served again after the heal and sold its whole stock"
}

// judgeAdminStock: GET /admin/v1/activities/{id}/stock answers 200 with
// zero drift and the numbers the checker counted.
func judgeAdminStock(rep *report, ans adminAnswer, b *books, ex expectations) {
	if ans.Err != nil || ans.Status != 200 {
		rep.add(vAdminStock, false, "answered %d %s %v", ans.Status, trim(ans.Body), ans.Err)
		return
	}
	var sr struct {
		SKUs []struct {
			SKUID     int64 `json:"skuId"`
			Initial   int64 `json:"initial"`
			Remaining int64 `json:"remaining"`
			Occupied  int64 `json:"occupied"`
			Ordered   int64 `json:"ordered"`
			Drift     int64 `json:"drift"`
		} `json:"skus"`
	}
	if err := json.Unmarshal(ans.Body, &sr); err != nil {
		rep.add(vAdminStock, false, "unparsable %s: %v", trim(ans.Body), err)
		return
	}
	occupied := b.occupied()
	var bad []string
	seen := map[int64]bool{}
	for _, l := range sr.SKUs {
		seen[l.SKUID] = true
		sb := b.SKUs[l.SKUID]
		if sb == nil {
			bad = append(bad, fmt.Sprintf("sku %d: not in the books", l.SKUID))
			continue
		}
		if l.Drift != 0 || l.Initial != ex.SKUs[l.SKUID] || l.Remaining != sb.Stock || l.Ordered != sb.LiveUnits || l.Occupied != occupied[l.SKUID] {
			bad = append(bad, fmt.Sprintf("sku %d: report drift %d initial %d remaining %d occupied %d ordered %d; books: initial %d remaining %d occupied %d ordered %d",
				l.SKUID, l.Drift, l.Initial, l.Remaining, l.Occupied, l.Ordered, ex.SKUs[l.SKUID], sb.Stock, occupied[l.SKUID], sb.LiveUnits))
		}
	}
	for id := range ex.SKUs {
		if !seen[id] {
			bad = append(bad, fmt.Sprintf("sku %d: missing from the report", id))
		}
	}
	rep.add(vAdminStock, len(bad) == 0, "%d SKUs reported %v", len(sr.SKUs), bad)
}

// reconReport is the reconciler's report as docs/operations-ledger.md
// describes it.
type reconReport struct {
	Drifts   int      `json:"drifts"`
	Warnings []string `json:"warnings"`
	SKUs     []struct {
		ActivityID int64 `json:"activityId"`
		SKUID      int64 `json:"skuId"`
		Redis      struct {
			Present   bool  `json:"present"`
			Initial   int64 `json:"initial"`
			Remaining int64 `json:"remaining"`
			Sold      int64 `json:"sold"`
			Records   int64 `json:"records"`
			Claimed   int64 `json:"claimed"`
		} `json:"redis"`
		DB struct {
			Initial   int64 `json:"initial"`
			Available int64 `json:"available"`
			Units     int64 `json:"units"`
		} `json:"db"`
		Drifts []struct {
			Kind   string `json:"kind"`
			Amount int64  `json:"amount"`
			Detail string `json:"detail"`
		} `json:"drifts"`
	} `json:"skus"`
}

// judgeReconcile: POST /admin/v1/reconcile answers 200 (wherever a store
// is configured a reconciler must be) with no drift, and its numbers are
// the checker's.
func judgeReconcile(rep *report, ans adminAnswer, b *books, ex expectations) {
	if ans.Err != nil || ans.Status != 200 {
		if !ex.Store {
			rep.note("no store configured: the reconciler answered %d %s", ans.Status, trim(ans.Body))
			return
		}
		rep.add(vRecon, false, "POST /admin/v1/reconcile answered %d %s %v", ans.Status, trim(ans.Body), ans.Err)
		return
	}
	var r reconReport
	if err := json.Unmarshal(ans.Body, &r); err != nil {
		rep.add(vRecon, false, "unparsable report %s: %v", trim(ans.Body), err)
		return
	}
	var drifts, counts []string
	seen := map[int64]bool{}
	for _, k := range r.SKUs {
		if k.ActivityID != activityID {
			continue
		}
		seen[k.SKUID] = true
		for _, d := range k.Drifts {
			drifts = append(drifts, fmt.Sprintf("sku %d %s %d (%s)", k.SKUID, d.Kind, d.Amount, d.Detail))
		}
		sb := b.SKUs[k.SKUID]
		if sb == nil {
			counts = append(counts, fmt.Sprintf("sku %d: not in the books", k.SKUID))
			continue
		}
		if !k.Redis.Present || k.Redis.Initial != sb.MetaInitial || k.Redis.Remaining != sb.Stock || k.Redis.Sold != sb.Sold ||
			k.Redis.Records != int64(len(sb.Users)) || k.Redis.Claimed != int64(len(sb.Claimed)) ||
			k.DB.Initial != sb.SnapInitial || k.DB.Available != sb.SnapAvail || k.DB.Units != sb.LiveUnits {
			counts = append(counts, fmt.Sprintf("sku %d: reconciler redis %+v db %+v; books: initial %d remaining %d sold %d records %d claimed %d, snapshot initial %d available %d, order units %d",
				k.SKUID, k.Redis, k.DB, sb.MetaInitial, sb.Stock, sb.Sold, len(sb.Users), len(sb.Claimed), sb.SnapInitial, sb.SnapAvail, sb.LiveUnits))
		}
	}
	for id := range ex.SKUs {
		if !seen[id] {
			counts = append(counts, fmt.Sprintf("sku %d: missing from the report", id))
		}
	}
	if len(r.Warnings) > 0 {
		rep.note("reconciler warnings: %v", head(r.Warnings, 5))
	}
	rep.add(vRecon, r.Drifts == 0 && len(drifts) == 0, "%d drifts %v", r.Drifts, head(drifts, 5))
	rep.add(vReconCounts, len(counts) == 0, "%v", head(counts, 5))
}

// checkInvariants reads the books and the admin API's reports and judges
// them (skus maps each SKU to its initial stock). It logs every verdict and
// fails the test on a broken one.
func (s *System) checkInvariants(run *Run, skus map[int64]int64) *report {
	s.t.Helper()
	b, err := s.readBooks(skus)
	if err != nil {
		s.t.Fatalf("read the books: %v", err)
	}
	ev := evidence{Run: run, Books: b, Races: s.raceReports()}
	ev.Stock.Status, ev.Stock.Body, ev.Stock.Err = s.admin("GET", fmt.Sprintf("/admin/v1/activities/%d/stock", activityID), nil)
	ev.Recon.Status, ev.Recon.Body, ev.Recon.Err = s.admin("POST", "/admin/v1/reconcile", nil)
	rep := judge(ev, expectations{SKUs: skus, Sweeper: s.sweeper, Store: s.dsn != "", Extra: s.expects})
	for _, v := range rep.Verdicts {
		if v.OK {
			s.t.Logf("  [ok]      %s: %s", v.Name, v.Detail)
		} else {
			s.t.Errorf("  [FAILED]  %s: %s", v.Name, v.Detail)
		}
	}
	for _, n := range rep.Notes {
		s.t.Logf("  [note]    %s", n)
	}
	return rep
}

func trim(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

func head[T any](xs []T, n int) []T {
	if len(xs) > n {
		return xs[:n]
	}
	return xs
}

// ---- the table ----

// tableEnv names the file each scenario appends its line to (make chaos).
const tableEnv = "SECKILL_CHAOS_TABLE"

// record logs the scenario's line and appends it to $SECKILL_CHAOS_TABLE.
func record(t interface {
	Helper()
	Logf(string, ...any)
	Name() string
	Failed() bool
}, run *Run, rep *report, took time.Duration) {
	t.Helper()
	inv := "OK"
	if !rep.ok() || t.Failed() {
		inv = "FAILED"
		if f := rep.failed(); len(f) > 0 {
			inv += " (" + strings.Join(head(f, 3), "; ") + ")"
		} else {
			inv += " (see the test log)"
		}
	}
	skus := make([]int64, 0, len(rep.Stock))
	for id := range rep.Stock {
		skus = append(skus, id)
	}
	sort.Slice(skus, func(i, j int) bool { return skus[i] < skus[j] })
	var stock []string
	for _, id := range skus {
		stock = append(stock, fmt.Sprintf("%d:%d", id, rep.Stock[id]))
	}
	after := "-"
	if f := run.Fault; f != nil {
		n := 0
		for i := range run.Attempts {
			if a := &run.Attempts[i]; a.taken() && f.phase(a) == phaseAfter {
				n++
			}
		}
		after = strconv.Itoa(n)
	}
	name := strings.TrimPrefix(t.Name(), "Test")
	line := fmt.Sprintf("| %-30s | %5d | %5d | %5s | %5d | %-15s | %4d | %5.1fs | %s |",
		name, run.sent(), run.accepted(), after, rep.Orders, strings.Join(stock, " "), rep.Held, took.Seconds(), inv)
	t.Logf("table: %s", line)
	if path := os.Getenv(tableEnv); path != "" {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err == nil {
			fmt.Fprintln(f, line)
			f.Close()
		}
	}
}

package chaos

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The checker's own test: judge is fed hand-built states. A state whose
// books add up passes every verdict; each broken state must fail the
// verdict named for what is broken. No servers: it runs in a blink.

// handState is what the checker reads, built by hand.
type handState struct {
	run   *Run
	books *books
	ex    expectations
	// The admin API's answers; nil: derived from the books (a system
	// whose reports agree with its books).
	stock, recon *adminAnswer
	races        []string
}

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

// goodState is a small sale at the moment the checker looks, whose books
// add up: SKU 101 (3 units) sold to users 1 and 2, SKU 102 (2 units) to
// user 3; a fault struck after user 1's and user 3's tickets (user 4 got
// 503 BUSY while it lasted) and healed before user 2 bought.
func goodState() *handState {
	h := &handState{ex: expectations{SKUs: map[int64]int64{skuNormal: 3, skuHot: 2}, Sweeper: true, Store: true}}
	h.run = &Run{Fault: &faultRun{
		faultPlan: faultPlan{Name: "hand-made fault", During: busy, Settle: 500 * time.Millisecond},
		Injected:  at(1), Healed: at(2),
	}}
	h.run.add(
		attempt{User: 1, SKU: skuNormal, Sent: at(0.1), Took: 10 * time.Millisecond, Status: 200, Code: "QUEUING", RequestNo: "r1"},
		attempt{User: 3, SKU: skuHot, Sent: at(0.2), Took: 10 * time.Millisecond, Status: 200, Code: "QUEUING", RequestNo: "r3"},
		attempt{User: 1, SKU: skuNormal, Sent: at(0.3), Took: 10 * time.Millisecond, Status: 409, Code: "DUPLICATE"},
		attempt{User: 4, SKU: skuHot, Sent: at(1.2), Took: 10 * time.Millisecond, Status: 503, Code: "BUSY"},
		attempt{User: 2, SKU: skuNormal, Sent: at(3), Took: 10 * time.Millisecond, Status: 200, Code: "QUEUING", RequestNo: "r2"},
		attempt{User: 5, SKU: skuNormal, Sent: at(3.1), Took: 10 * time.Millisecond, Status: 429, Code: "RATE_LIMITED"},
	)
	h.books = &books{
		SKUs: map[int64]*skuBooks{
			skuNormal: {SKU: skuNormal, Initial: 3, MetaInitial: 3, Stock: 1, Sold: 2, StockKey: true,
				Users: map[string]string{"1": "r1", "2": "r2"}, Claimed: map[string]bool{"r1": true, "r2": true},
				Orders: []order{{RequestNo: "r1", OrderNo: "o1", Status: "PENDING_PAYMENT", User: 1, SKU: skuNormal, Quantity: 1},
					{RequestNo: "r2", OrderNo: "o2", Status: "PENDING_PAYMENT", User: 2, SKU: skuNormal, Quantity: 1}},
				LiveUnits: 2, SnapInitial: 3, SnapAvail: 1, SnapSold: 2, SnapFound: true},
			skuHot: {SKU: skuHot, Initial: 2, MetaInitial: 2, Stock: 1, Sold: 1, StockKey: true,
				Users: map[string]string{"3": "r3"}, Claimed: map[string]bool{"r3": true},
				Orders:    []order{{RequestNo: "r3", OrderNo: "o3", Status: "PENDING_PAYMENT", User: 3, SKU: skuHot, Quantity: 1}},
				LiveUnits: 1, SnapInitial: 2, SnapAvail: 1, SnapSold: 1, SnapFound: true},
		},
		Results: map[string]map[string]string{
			"r1": {fieldState: stateSuccess, fieldOrderNo: "o1"},
			"r2": {fieldState: stateSuccess, fieldOrderNo: "o2"},
			"r3": {fieldState: stateSuccess, fieldOrderNo: "o3"},
			// user 4's 503: the engine released and answered FAIL BUSY.
			"r4": {fieldState: stateFail, fieldCode: "BUSY"},
		},
		Log: map[string]logRow{
			"r1": {RequestNo: "r1", SKU: skuNormal, User: 1, Status: "SUCCESS", Remark: "result written", OrderNo: "o1"},
			"r2": {RequestNo: "r2", SKU: skuNormal, User: 2, Status: "SUCCESS", Remark: "result written", OrderNo: "o2"},
			"r3": {RequestNo: "r3", SKU: skuHot, User: 3, Status: "SUCCESS", Remark: "result written", OrderNo: "o3"},
			"r4": {RequestNo: "r4", SKU: skuHot, User: 4, Status: "FAILED", Remark: "compensated: released"},
		},
	}
	return h
}

// withLine puts SKU 102 in queue mode in the good state: user 6 was
// answered 202 WAITING (r6), then 409 WAITING naming r6, and got the last
// unit; user 7 waited behind (r7) and ended FAIL SOLD_OUT.
func (h *handState) withLine() *handState {
	// SKU 101 sells direct: a mixed sale's answers.
	h.run.Fault.Healthy = healthy.with("202 WAITING", "409 WAITING")
	h.run.add(
		attempt{User: 6, SKU: skuHot, Sent: at(0.4), Took: 5 * time.Millisecond, Status: 202, Code: "WAITING", RequestNo: "1-102-6"},
		attempt{User: 7, SKU: skuHot, Sent: at(0.5), Took: 5 * time.Millisecond, Status: 202, Code: "WAITING", RequestNo: "1-102-7"},
		attempt{User: 6, SKU: skuHot, Sent: at(0.6), Took: 5 * time.Millisecond, Status: 409, Code: "WAITING", RequestNo: "1-102-6"},
	)
	sb := h.books.SKUs[skuHot]
	sb.Stock, sb.Sold, sb.LiveUnits, sb.SnapAvail, sb.SnapSold = 0, 2, 2, 0, 2
	sb.Users["6"], sb.Claimed["1-102-6"] = "1-102-6", true
	sb.Orders = append(sb.Orders, order{RequestNo: "1-102-6", OrderNo: "o6", Status: "PENDING_PAYMENT", User: 6, SKU: skuHot, Quantity: 1})
	h.books.Results["1-102-6"] = map[string]string{fieldState: stateSuccess, fieldOwner: "6", fieldOrderNo: "o6"}
	h.books.Results["1-102-7"] = map[string]string{fieldState: stateFail, fieldOwner: "7", fieldCode: failSoldOut}
	h.books.Log["1-102-6"] = logRow{RequestNo: "1-102-6", SKU: skuHot, User: 6, Status: "SUCCESS", Remark: "result written", OrderNo: "o6"}
	h.books.Attempts = map[string]lineAttempt{"1-102-6": {User: 6, SKU: skuHot, Records: 1}, "1-102-7": {User: 7, SKU: skuHot, Records: 2}}
	return h
}

// ghost adds a 409 WAITING, answered at when, naming a ticket of user 9
// that is in no line and has no result.
func (h *handState) ghost(when time.Time) {
	h.run.add(attempt{User: 9, SKU: skuHot, Sent: when.Add(-time.Millisecond), Took: time.Millisecond, Status: 409, Code: "WAITING", RequestNo: "1-102-9"})
}

// stockAnswer is what GET /admin/v1/activities/1/stock answers for b.
func stockAnswer(b *books) *adminAnswer {
	type line struct {
		SKUID     int64 `json:"skuId"`
		Initial   int64 `json:"initial"`
		Remaining int64 `json:"remaining"`
		Occupied  int64 `json:"occupied"`
		Ordered   int64 `json:"ordered"`
		Drift     int64 `json:"drift"`
	}
	var out struct {
		SKUs []line `json:"skus"`
	}
	occ := b.occupied()
	for _, id := range []int64{skuNormal, skuHot} {
		sb := b.SKUs[id]
		out.SKUs = append(out.SKUs, line{SKUID: id, Initial: sb.MetaInitial, Remaining: sb.Stock, Occupied: occ[id], Ordered: sb.LiveUnits,
			Drift: sb.LiveUnits + occ[id] + sb.Stock - sb.MetaInitial})
	}
	body, _ := json.Marshal(out)
	return &adminAnswer{Status: 200, Body: body}
}

// reconAnswer is the reconciler's report on b, with drifts added.
func reconAnswer(b *books, drifts ...string) *adminAnswer {
	var r strings.Builder
	fmt.Fprintf(&r, `{"drifts":%d,"skus":[`, len(drifts))
	for i, id := range []int64{skuNormal, skuHot} {
		sb := b.SKUs[id]
		if i > 0 {
			r.WriteString(",")
		}
		var ds []string
		if i == 0 {
			for _, d := range drifts {
				ds = append(ds, fmt.Sprintf(`{"kind":%q,"amount":1,"detail":"hand-made"}`, d))
			}
		}
		fmt.Fprintf(&r, `{"activityId":1,"skuId":%d,"redis":{"present":true,"initial":%d,"remaining":%d,"sold":%d,"records":%d,"claimed":%d},`+
			`"db":{"initial":%d,"available":%d,"sold":%d,"orders":%d,"units":%d},"drifts":[%s]}`,
			id, sb.MetaInitial, sb.Stock, sb.Sold, len(sb.Users), len(sb.Claimed),
			sb.SnapInitial, sb.SnapAvail, sb.SnapSold, len(sb.Orders), sb.LiveUnits, strings.Join(ds, ","))
	}
	r.WriteString("]}")
	return &adminAnswer{Status: 200, Body: []byte(r.String())}
}

func (h *handState) judge() *report {
	ev := evidence{Run: h.run, Books: h.books, Races: h.races}
	if h.stock == nil {
		h.stock = stockAnswer(h.books)
	}
	if h.recon == nil {
		h.recon = reconAnswer(h.books)
	}
	ev.Stock, ev.Recon = *h.stock, *h.recon
	return judge(ev, h.ex)
}

// failTicket turns user 2's acknowledged ticket r2 into one that ended
// FAIL with its unit back in Redis — the books still add up — told by
// remark and code.
func (h *handState) failTicket(remark, code string) {
	sb := h.books.SKUs[skuNormal]
	sb.Orders = sb.Orders[:1]
	sb.LiveUnits, sb.SnapAvail, sb.SnapSold = 1, 2, 1
	sb.Stock, sb.Sold = 2, 1
	delete(sb.Users, "2")
	delete(sb.Claimed, "r2")
	h.books.Results["r2"] = map[string]string{fieldState: stateFail, fieldCode: code}
	h.books.Log["r2"] = logRow{RequestNo: "r2", SKU: skuNormal, User: 2, Status: "FAILED", Remark: remark}
}

// lossBefore declares a Redis loss of SKU 101 that healed at until.
func (h *handState) lossBefore(until time.Time) {
	h.run.Fault.Loss = &redisLoss{SKUs: []int64{skuNormal}, Until: until}
}

const (
	orphanRemark     = "released by the reconciler: orphan: no order, and its message never reached the consumer"
	releasedRemark   = "occupancy released before the order was made"
	deadLetterRemark = "released by the reconciler: orphan: no order, its message was dead-lettered (order message signed with an unknown key)"
)

func TestCheckerPassesBooksThatAddUp(t *testing.T) {
	for _, line := range []bool{false, true} {
		t.Run("queue mode "+strconv.FormatBool(line), func(t *testing.T) {
			h := goodState()
			if line {
				h.withLine()
			}
			rep := h.judge()
			for _, v := range rep.Verdicts {
				if !v.OK {
					t.Errorf("%s: %s", v.Name, v.Detail)
				}
			}
			if len(rep.Verdicts) < 20 {
				t.Errorf("only %d verdicts", len(rep.Verdicts))
			}
		})
	}
}

// TestCheckerFailsBrokenLines: queue mode's verdicts, each on a line broken
// by hand.
func TestCheckerFailsBrokenLines(t *testing.T) {
	cases := []struct {
		name   string
		break_ func(h *handState)
		want   string
	}{
		{"a ticket answered 202 WAITING is still WAITING", func(h *handState) {
			h.books.Results["1-102-7"] = map[string]string{fieldState: stateWaiting, fieldOwner: "7", fieldCode: "2:14"}
		}, vWaitFinal},
		{"a ticket answered 202 WAITING is still WAITING (idle)", func(h *handState) {
			h.books.Results["1-102-7"] = map[string]string{fieldState: stateWaiting, fieldOwner: "7", fieldCode: "2:14"}
		}, vNoWaiting},
		{"an attempt nobody was answered for is left WAITING", func(h *handState) {
			h.books.Results["1-102-9"] = map[string]string{fieldState: stateWaiting, fieldOwner: "9", fieldCode: "2:15"}
		}, vNoWaiting},
		{"a ticket answered 202 WAITING has no result", func(h *handState) {
			delete(h.books.Results, "1-102-7")
		}, vWaitFinal},
		{"the line gave up on a durable attempt: FAIL BUSY", func(h *handState) {
			h.books.Results["1-102-7"][fieldCode] = "BUSY"
		}, vWaitFinal},
		{"the line's retries spent the buyer's window: FAIL RATE_LIMITED", func(h *handState) {
			h.books.Results["1-102-7"][fieldCode] = "RATE_LIMITED"
		}, vWaitFinal},
		{"a waiting ticket served twice: FAIL DUPLICATE over its own live order", func(h *handState) {
			h.books.Results["1-102-6"] = map[string]string{fieldState: stateFail, fieldOwner: "6", fieldCode: "DUPLICATE"}
		}, vWaitOnce},
		{"a waiting ticket ended FAIL still holding its occupancy", func(h *handState) {
			sb := h.books.SKUs[skuHot]
			sb.Users["7"], sb.Stock, sb.Sold = "1-102-7", 0, 3
		}, vWaitOnce},
		{"a waiting ticket's SUCCESS names another ticket's order", func(h *handState) {
			h.books.Results["1-102-6"][fieldOrderNo] = "o3"
		}, vWaitOnce},
		{"a 409 WAITING named another buyer's ticket", func(h *handState) {
			h.run.add(attempt{User: 8, SKU: skuHot, Sent: at(0.7), Took: time.Millisecond, Status: 409, Code: "WAITING", RequestNo: "1-102-7"})
		}, vWaitNamed},
		{"a 409 WAITING named a ticket of another SKU", func(h *handState) {
			h.run.add(attempt{User: 7, SKU: skuNormal, Sent: at(0.7), Took: time.Millisecond, Status: 409, Code: "WAITING", RequestNo: "1-102-7"})
		}, vWaitNamed},
		{"an attempt in the line is still WAITING, though nobody was answered for it", func(h *handState) {
			h.books.Attempts["1-102-9"] = lineAttempt{User: 9, SKU: skuHot, Records: 1}
			h.books.Results["1-102-9"] = map[string]string{fieldState: stateWaiting, fieldOwner: "9", fieldCode: "2:15"}
		}, vLineEnded},
		{"an attempt in the line has no result", func(h *handState) {
			h.books.Attempts["1-102-9"] = lineAttempt{User: 9, SKU: skuHot, Records: 1}
		}, vLineEnded},
		{"a ticket answered 202 WAITING is in no line", func(h *handState) {
			delete(h.books.Attempts, "1-102-7")
		}, vWaitFinal},
		{"a 409 WAITING long after the fault names a ticket in no line", func(h *handState) {
			h.ghost(h.run.Fault.Injected.Add(ghostGrace + time.Second))
		}, vWaitFinal},
		{"a 409 WAITING before any fault names a ticket in no line", func(h *handState) {
			h.ghost(at(0.9))
		}, vWaitFinal},
		{"a purchase served direct in a sale of SKUs in queue mode", func(h *handState) {
			h.run.Fault.Healthy = healthyQueue
		}, vBefore},
		{"a buyer told 409 WAITING holds two orders", func(h *handState) {
			sb := h.books.SKUs[skuHot]
			sb.Orders = append(sb.Orders, order{RequestNo: "1-102-66", OrderNo: "o66", Status: "PENDING_PAYMENT", User: 6, SKU: skuHot, Quantity: 1})
		}, vWaitNamed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := goodState().withLine()
			c.break_(h)
			mustFail(t, h.judge(), c.want)
		})
	}
}

// TestCheckerAcceptsAGhostWhileTheFaultLasts: an edge killed between a
// buyer's waiting record and the attempt leaves a record that names a
// ticket in no line; a 409 WAITING naming it soon after the fault is
// noted, not failed.
func TestCheckerAcceptsAGhostWhileTheFaultLasts(t *testing.T) {
	h := goodState().withLine()
	h.run.Fault.During = h.run.Fault.Healthy.with("503 BUSY")
	h.ghost(h.run.Fault.Injected.Add(time.Second))
	rep := h.judge()
	for _, v := range rep.Verdicts {
		if !v.OK {
			t.Errorf("%s: %s", v.Name, v.Detail)
		}
	}
	if !strings.Contains(strings.Join(rep.Notes, "\n"), "in no line") {
		t.Errorf("the ghost is not noted: %v", rep.Notes)
	}
}

// mustFail fails t unless rep has the verdict want, failed.
func mustFail(t *testing.T, rep *report, want string) {
	t.Helper()
	found := false
	for _, v := range rep.Verdicts {
		if v.Name == want {
			found = true
			if v.OK {
				t.Errorf("%q passed: %s", v.Name, v.Detail)
			} else {
				t.Logf("%q failed as it must: %s", v.Name, v.Detail)
			}
		}
	}
	if !found {
		t.Errorf("no verdict %q among %d", want, len(rep.Verdicts))
	}
}

func TestCheckerFailsBrokenBooks(t *testing.T) {
	cases := []struct {
		name   string
		break_ func(h *handState)
		want   string // the verdict that must fail
	}{
		{"an acknowledged ticket ended FAIL (released as an orphan) without a declared Redis loss", func(h *handState) {
			h.failTicket(orphanRemark, failReleased)
		}, vAckedOK},
		{"an acknowledged ticket ended FAIL with the consumer's story, but no Redis loss was declared", func(h *handState) {
			h.failTicket(releasedRemark, failReleased)
		}, vAckedOK},
		{"an acknowledged ticket ended FAIL under a declared loss, but its story is the orphan sweeper's", func(h *handState) {
			h.failTicket(orphanRemark, failReleased)
			h.lossBefore(at(10))
		}, vAckedOK},
		{"an acknowledged ticket ended FAIL with the loss's story, but was answered after the loss healed", func(h *handState) {
			h.failTicket(releasedRemark, failReleased)
			h.lossBefore(at(2))
		}, vAckedOK},
		{"an acknowledged ticket ended FAIL under a declared loss of another SKU", func(h *handState) {
			h.failTicket(releasedRemark, failReleased)
			h.run.Fault.Loss = &redisLoss{SKUs: []int64{skuHot}, Until: at(10)}
		}, vAckedOK},
		{"an acknowledged ticket ended FAIL with the dead letter's story, but no dead-lettering was declared", func(h *handState) {
			h.failTicket(deadLetterRemark, failReleased)
		}, vAckedOK},
		{"an acknowledged ticket ended FAIL under declared dead-lettering, but its story is a plain orphan's", func(h *handState) {
			h.failTicket(orphanRemark, failReleased)
			h.run.Fault.DeadLetters = &deadLettering{Until: at(10)}
		}, vAckedOK},
		{"an acknowledged ticket ended FAIL with the dead letter's story, but was answered after the heal", func(h *handState) {
			h.failTicket(deadLetterRemark, failReleased)
			h.run.Fault.DeadLetters = &deadLettering{Until: at(0.5)}
		}, vAckedOK},
		{"an acknowledged ticket ended FAIL with the dead letter's story, but not RELEASED", func(h *handState) {
			h.failTicket(deadLetterRemark, failSoldOut)
			h.run.Fault.DeadLetters = &deadLettering{Until: at(10)}
		}, vAckedOK},
		{"an acknowledged ticket's result is gone without a declared loss", func(h *handState) {
			delete(h.books.Results, "r2")
		}, vResultKept},
		{"an acknowledged ticket's result is gone, but the declared loss is of another SKU's shard", func(h *handState) {
			delete(h.books.Results, "r2")
			h.run.Fault.Loss = &redisLoss{SKUs: []int64{skuHot}, Until: at(10)}
		}, vResultKept},
		{"an acknowledged ticket is still QUEUING", func(h *handState) {
			h.books.Results["r2"] = map[string]string{fieldState: stateQueuing}
		}, vFinal},
		{"a result key of an unanswered attempt is left QUEUING", func(h *handState) {
			h.books.Results["r9"] = map[string]string{fieldState: stateQueuing}
		}, vNoQueuing},
		{"a request-log row is left MQ_QUEUED", func(h *handState) {
			h.books.Log["r9"] = logRow{RequestNo: "r9", SKU: skuHot, User: 9, Status: "MQ_QUEUED"}
		}, vNoOpenLog},
		{"a request-log row is left COMPENSATING", func(h *handState) {
			h.books.Log["r4"] = logRow{RequestNo: "r4", SKU: skuHot, User: 4, Status: "COMPENSATING", Updated: at(1.3)}
		}, vNoOpenLog},
		{"a request-log row is left COMPENSATING under a declared loss of another SKU", func(h *handState) {
			h.lossBefore(at(2))
			h.books.Log["r4"] = logRow{RequestNo: "r4", SKU: skuHot, User: 4, Status: "COMPENSATING", Updated: at(1.3)}
		}, vNoOpenLog},
		{"a request-log row is left COMPENSATING under a declared loss, its ticket still holding its record", func(h *handState) {
			h.run.Fault.Loss = &redisLoss{SKUs: []int64{skuHot}, Until: at(2)}
			h.books.Log["r4"] = logRow{RequestNo: "r4", SKU: skuHot, User: 4, Status: "COMPENSATING", Updated: at(1.3)}
			sb := h.books.SKUs[skuHot]
			sb.Users["4"], sb.Stock = "r4", 0
			sb.Sold = 2
		}, vNoOpenLog},
		{"a request-log row is left COMPENSATING under a declared loss, written after the fault", func(h *handState) {
			h.run.Fault.Loss = &redisLoss{SKUs: []int64{skuHot}, Until: at(2)}
			h.books.Log["r4"] = logRow{RequestNo: "r4", SKU: skuHot, User: 4, Status: "COMPENSATING", Updated: at(5)}
		}, vNoOpenLog},
		{"the reconciler answers 503", func(h *handState) {
			h.recon = &adminAnswer{Status: 503, Body: []byte(`{"code":"UNAVAILABLE","message":"no reconciler configured in this process"}`)}
		}, vRecon},
		{"the reconciler reports drift", func(h *handState) {
			h.recon = reconAnswer(h.books, "orphan")
		}, vRecon},
		{"the reconciler counts other numbers than the books", func(h *handState) {
			b := *h.books
			b.SKUs = map[int64]*skuBooks{skuNormal: ptr(*h.books.SKUs[skuNormal]), skuHot: h.books.SKUs[skuHot]}
			b.SKUs[skuNormal].Stock = 0
			h.recon = reconAnswer(&b)
		}, vReconCounts},
		{"the admin stock report disagrees with the books", func(h *handState) {
			h.stock = &adminAnswer{Status: 200, Body: []byte(`{"skus":[{"skuId":101,"initial":3,"remaining":0,"occupied":0,"ordered":2,"drift":0},` +
				`{"skuId":102,"initial":2,"remaining":1,"occupied":0,"ordered":1,"drift":0}]}`)}
		}, vAdminStock},
		{"Redis holds one unit too many while both reports say zero drift", func(h *handState) {
			h.stock, h.recon = stockAnswer(h.books), reconAnswer(h.books) // taken before the unit appears
			h.books.SKUs[skuNormal].Stock++
		}, skuVerdict(skuNormal, vLedger)},
		{"a user has two live orders of one SKU", func(h *handState) {
			sb := h.books.SKUs[skuNormal]
			sb.Orders[1].User = 1
		}, skuVerdict(skuNormal, vOneOrder)},
		{"the snapshot counts a unit the orders do not", func(h *handState) {
			h.books.SKUs[skuHot].SnapAvail = 0
		}, skuVerdict(skuHot, vSnapshot)},
		{"an occupancy holds stock without an order at quiescence", func(h *handState) {
			sb := h.books.SKUs[skuHot]
			sb.Users["8"], sb.Stock = "r8", 0
			sb.Sold = 2
		}, skuVerdict(skuHot, vNoHeld)},
		{"a FAIL ticket still holds its record", func(h *handState) {
			h.failTicket(releasedRemark, failReleased)
			h.lossBefore(at(10))
			sb := h.books.SKUs[skuNormal]
			sb.Users["2"], sb.Stock = "r2", 1
		}, vReleased},
		{"SUCCESS names another buyer's order", func(h *handState) {
			h.books.Results["r2"][fieldOrderNo] = "o3"
		}, vAnswers},
		{"no sales after the fault healed", func(h *handState) {
			for i := range h.run.Attempts {
				if a := &h.run.Attempts[i]; a.RequestNo == "r2" {
					a.Status, a.Code, a.RequestNo = 410, "SOLD_OUT", ""
				}
			}
		}, vResumed},
		{"a 500 while the fault lasted", func(h *handState) {
			h.run.add(attempt{User: 6, SKU: skuHot, Sent: at(1.5), Took: time.Millisecond, Status: 500, Code: "INTERNAL"})
		}, vDuring},
		{"a transport error after the fault healed", func(h *handState) {
			h.run.add(attempt{User: 6, SKU: skuHot, Sent: at(2.6), Err: "connection refused"})
		}, vAfter},
		{"a 503 after the fault healed and settled", func(h *handState) {
			h.run.add(attempt{User: 6, SKU: skuHot, Sent: at(2.6), Took: time.Millisecond, Status: 503, Code: "BUSY"})
		}, vAfter},
		{"a 404 on the SKU whose ledger is away", func(h *handState) {
			h.run.Fault.DuringSKU = map[int64]statuses{skuNormal: healthy, skuHot: busy}
			h.run.add(attempt{User: 6, SKU: skuHot, Sent: at(1.5), Took: time.Millisecond, Status: 404, Code: "UNKNOWN_SKU"})
		}, vDuring},
		{"a 503 on the SKU whose shard stayed up", func(h *handState) {
			h.run.Fault.DuringSKU = map[int64]statuses{skuNormal: healthy, skuHot: busy}
			h.run.add(attempt{User: 6, SKU: skuNormal, Sent: at(1.5), Took: time.Millisecond, Status: 503, Code: "BUSY"})
		}, vDuring},
		{"a 503 before the fault", func(h *handState) {
			h.run.add(attempt{User: 6, SKU: skuHot, Sent: at(0.5), Took: time.Millisecond, Status: 503, Code: "BUSY"})
		}, vBefore},
		{"the fault struck before any sale", func(h *handState) {
			h.run.Fault.Injected = at(0.05)
		}, vHit},
		{"a run without a fault got an answer it does not allow", func(h *handState) {
			h.run.Fault, h.run.Allowed = nil, healthy
			h.run.add(attempt{User: 6, SKU: skuHot, Sent: at(0.5), Took: time.Millisecond, Status: 503, Code: "BUSY"})
		}, vAllowed},
		{"a process reported a data race", func(h *handState) {
			h.races = []string{"edge: WARNING: DATA RACE\nWrite at 0x00c000123456 by goroutine 7"}
		}, vRaces},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := goodState()
			c.break_(h)
			mustFail(t, h.judge(), c.want)
		})
	}
}

// A queue-mode line that already spoke for the stock when the fault
// settled answers every later attempt 410 SOLD_OUT: sales resumed if the
// SKU's line served a ticket waiting at the heal and the SKU sold its
// whole stock, and not if its line served none or stock is left (the
// 410s were not true).
func TestCheckerJudgesALineThatSpokeForTheStock(t *testing.T) {
	for _, c := range []struct {
		name   string
		served bool
		live   int64 // SKU 101's units in live orders at the end, of 3
		want   bool
	}{
		{"served after the heal, all sold", true, 3, true},
		{"served nobody after the heal", false, 3, false},
		{"served after the heal, a unit left", true, 2, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := goodState()
			for i := range h.run.Attempts {
				if a := &h.run.Attempts[i]; a.RequestNo == "r2" {
					a.Status, a.Code, a.RequestNo = 410, "SOLD_OUT", ""
				}
			}
			h.run.Fault.LineServed = map[int64]bool{skuNormal: c.served, skuHot: true}
			h.books.SKUs[skuNormal].LiveUnits = c.live
			var v *verdict
			rep := h.judge()
			for i := range rep.Verdicts {
				if rep.Verdicts[i].Name == vResumed {
					v = &rep.Verdicts[i]
				}
			}
			switch {
			case v == nil:
				t.Fatalf("no verdict %q among %d", vResumed, len(rep.Verdicts))
			case v.OK != c.want:
				t.Errorf("%q: OK %v, want %v: %s", v.Name, v.OK, c.want, v.Detail)
			default:
				t.Logf("%s", v.Detail)
			}
		})
	}
}

// The checker is strict, not blind: a FAIL the declared loss explains —
// answered before the emptied Redis came back, its story the consumer's
// (the record was gone) — passes, with its result kept or lost.
func TestCheckerAcceptsAFailTheDeclaredLossExplains(t *testing.T) {
	for _, keep := range []bool{true, false} {
		t.Run("result kept "+strconv.FormatBool(keep), func(t *testing.T) {
			h := goodState()
			h.failTicket(releasedRemark, failReleased)
			h.lossBefore(at(10))
			if !keep {
				delete(h.books.Results, "r2")
			}
			rep := h.judge()
			for _, v := range rep.Verdicts {
				if !v.OK {
					t.Errorf("%s: %s", v.Name, v.Detail)
				}
			}
		})
	}
}

// TestCheckerAcceptsAFailDeclaredDeadLetteringExplains: the sweeper ended a
// ticket whose message was dead-lettered, its unit back.
func TestCheckerAcceptsAFailDeclaredDeadLetteringExplains(t *testing.T) {
	h := goodState()
	h.failTicket(deadLetterRemark, failReleased)
	h.run.Fault.DeadLetters = &deadLettering{Until: at(10)}
	for _, v := range h.judge().Verdicts {
		if !v.OK {
			t.Errorf("%s: %s", v.Name, v.Detail)
		}
	}
}

// A declared loss of the hot SKU's Redis froze user 4's compensation (the
// buyer got 503, the release failed with Redis away, and Redis came back
// without the occupancy): the row is reported, not failed.
func TestCheckerReportsACompensationTheDeclaredLossFroze(t *testing.T) {
	h := goodState()
	h.run.Fault.Loss = &redisLoss{SKUs: []int64{skuHot}, Until: at(2)}
	h.books.Log["r4"] = logRow{RequestNo: "r4", SKU: skuHot, User: 4, Status: "COMPENSATING", Updated: at(1.3),
		Remark: "write queuing result: connection reset by peer"}
	rep := h.judge()
	for _, v := range rep.Verdicts {
		if !v.OK {
			t.Errorf("%s: %s", v.Name, v.Detail)
		}
	}
	if len(rep.Notes) == 0 || !strings.Contains(strings.Join(rep.Notes, "\n"), "PRODUCT GAP") {
		t.Errorf("the frozen row is not reported: %v", rep.Notes)
	}
}

func ptr[T any](v T) *T { return &v }

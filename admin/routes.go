package admin

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"

	"github.com/valyala/fasthttp"

	"seckill/sale"
	"seckill/stock"
	"seckill/stock/results"
	"seckill/store"
)

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

func (s *Server) createActivity(ctx *fasthttp.RequestCtx) {
	var a sale.Activity
	if !decode(ctx, &a) {
		return
	}
	if err := a.Validate(); err != nil {
		writeErr(ctx, fasthttp.StatusBadRequest, "BAD_REQUEST", err.Error())
		return
	}
	// A SKU naming a hot shard this fleet lacks would be refused by every
	// process (stock.Client fails closed): refuse it here, where the
	// operator still can fix it.
	for _, k := range a.SKUs {
		if n := s.d.Stock.Shards().HotCount(); k.HotShard != nil && *k.HotShard >= n {
			writeErr(ctx, fasthttp.StatusBadRequest, "BAD_REQUEST", fmt.Sprintf(
				"activity %d sku %d: hotShard %d, but redis.hot configures %d hot shard(s)", a.ID, k.ID, *k.HotShard, n))
			return
		}
		for _, h := range k.HotShards {
			if n := s.d.Stock.Shards().HotCount(); h >= n {
				writeErr(ctx, fasthttp.StatusBadRequest, "BAD_REQUEST", fmt.Sprintf(
					"activity %d sku %d: hotShards names %d, but redis.hot configures %d hot shard(s)", a.ID, k.ID, h, n))
				return
			}
		}
	}
	c, cancel := opCtx(ctx)
	defer cancel()
	// A live SKU's bucket count is fixed: refused before the database
	// keeps a count its Redis ledger does not have.
	if err := s.d.Stock.CheckBuckets(c, &a); err != nil {
		s.fail(ctx, err)
		return
	}
	// The database first: it is where Preheat rebuilds stock from, and an
	// activity must have its snapshot before any order can land.
	if err := s.d.Store.PutActivity(c, a); err != nil {
		s.fail(ctx, err)
		return
	}
	if err := s.d.Stock.Preheat(c, a); err != nil {
		s.fail(ctx, err)
		return
	}
	got, _ := s.d.Stock.Catalog().Activity(a.ID)
	writeJSON(ctx, fasthttp.StatusOK, got)
}

func (s *Server) listActivities(ctx *fasthttp.RequestCtx) {
	c, cancel := opCtx(ctx)
	defer cancel()
	if err := s.d.Stock.Catalog().Load(c); err != nil {
		s.fail(ctx, err)
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, s.d.Stock.Catalog().Activities())
}

func (s *Server) setState(ctx *fasthttp.RequestCtx) {
	id, ok := pathInt(ctx, "id")
	if !ok {
		return
	}
	var body StateChange
	if !decode(ctx, &body) {
		return
	}
	if body.State != sale.StateOnline && body.State != sale.StateOffline {
		writeErr(ctx, fasthttp.StatusBadRequest, "BAD_REQUEST", "state must be ONLINE or OFFLINE")
		return
	}
	c, cancel := opCtx(ctx)
	defer cancel()
	if err := s.d.Stock.SetState(c, id, body.State); err != nil {
		s.fail(ctx, err)
		return
	}
	a, _ := s.d.Stock.Catalog().Activity(id)
	if err := s.d.Store.PutActivity(c, *a); err != nil {
		s.fail(ctx, err)
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, a)
}

func queryInt(ctx *fasthttp.RequestCtx, name string) int64 {
	n, _ := strconv.ParseInt(string(ctx.QueryArgs().Peek(name)), 10, 64)
	return n
}

func (s *Server) soldOut(ctx *fasthttp.RequestCtx) {
	sku, ok := pathInt(ctx, "sku")
	if !ok {
		return
	}
	var body SoldOutChange
	if !decode(ctx, &body) {
		return
	}
	if body.SoldOut == nil {
		writeErr(ctx, fasthttp.StatusBadRequest, "BAD_REQUEST", "soldOut (true or false) is required")
		return
	}
	a, err := s.resolveSKU(sku, max(body.ActivityID, queryInt(ctx, "activityId")))
	if err != nil {
		s.fail(ctx, err)
		return
	}
	c, cancel := opCtx(ctx)
	defer cancel()
	if err := s.d.Stock.SetSoldOut(c, a.ID, sku, *body.SoldOut); err != nil {
		s.fail(ctx, err)
		return
	}
	n, err := s.d.Stock.Counts(c, a.ID, sku)
	if err != nil {
		s.fail(ctx, err)
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, SoldOutAnswer{ActivityID: a.ID, SKUID: sku, SoldOut: *body.SoldOut || n.Remaining <= 0,
		Marked: *body.SoldOut, Remaining: n.Remaining})
}

// SoldOutAnswer answers PUT /admin/v1/skus/{sku}/soldout.
type SoldOutAnswer struct {
	ActivityID int64 `json:"activityId"`
	SKUID      int64 `json:"skuId"`
	// SoldOut: the SKU is sold out now, by the mark or by its stock.
	SoldOut bool `json:"soldOut"`
	// Marked is the on-call mark as this call set it.
	Marked    bool  `json:"marked"`
	Remaining int64 `json:"remaining"` // Redis stock
}

// RestockAnswer answers POST /admin/v1/skus/{sku}/restock.
type RestockAnswer struct {
	ActivityID int64 `json:"activityId"`
	SKUID      int64 `json:"skuId"`
	Added      int64 `json:"added"`     // the units this call added
	Remaining  int64 `json:"remaining"` // Redis stock after it
	Initial    int64 `json:"initial"`   // Redis meta after it (raised by the units)
	// Rebuilding: Redis had lost the SKU; the database is raised and the
	// watcher's rebuild from it sells the units (Remaining and Initial are
	// 0). The restock is done: do not retry it.
	Rebuilding bool `json:"rebuilding,omitempty"`
}

func (s *Server) restock(ctx *fasthttp.RequestCtx) {
	sku, ok := pathInt(ctx, "sku")
	if !ok {
		return
	}
	var body RestockRequest
	if !decode(ctx, &body) {
		return
	}
	if body.Units <= 0 || body.Units > 10_000_000 {
		writeErr(ctx, fasthttp.StatusBadRequest, "BAD_REQUEST", "units must be 1..10000000")
		return
	}
	a, err := s.resolveSKU(sku, max(body.ActivityID, queryInt(ctx, "activityId")))
	if err != nil {
		s.fail(ctx, err)
		return
	}
	c, cancel := opCtx(ctx)
	defer cancel()
	// The database snapshot first, so that it is never below what Redis
	// may sell; a crash in between leaves Redis short (undersell), which
	// reconciliation reports, never the other way round.
	if err := s.d.Store.Restock(c, a.ID, sku, body.Units); err != nil {
		s.fail(ctx, err)
		return
	}
	rem, initial, err := s.d.Stock.Restock(c, a.ID, sku, body.Units)
	lost := errors.Is(err, stock.ErrLost)
	if err != nil && !lost {
		s.fail(ctx, err)
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, RestockAnswer{ActivityID: a.ID, SKUID: sku, Added: body.Units, Remaining: rem, Initial: initial,
		Rebuilding: lost})
}

// SKUStock is one SKU's line of the stock report.
type SKUStock struct {
	SKUID int64 `json:"skuId"`
	Hot   bool  `json:"hot"`
	// Shard names the Redis deployment that holds the SKU's keys:
	// "default", "hot0", "hot1", … ("missing": the SKU names a hot shard
	// this process lacks, and is refused).
	Shard     string `json:"shard"`
	Initial   int64  `json:"initial"`   // Redis meta (raised by restocks)
	Remaining int64  `json:"remaining"` // Redis stock
	Occupied  int64  `json:"occupied"`  // units held by tickets not (yet) ordered
	Ordered   int64  `json:"ordered"`   // units in live orders (DB)
	Orders    int64  `json:"orders"`    // live orders (DB)
	Snapshot  struct {
		Initial   int64 `json:"initial"`
		Available int64 `json:"available"`
		Sold      int64 `json:"sold"`
	} `json:"snapshot"`
	SoldOut bool `json:"soldOut"`
	Marked  bool `json:"markedSoldOut"`
	// Drift is ordered + occupied + remaining + inFlight − initial: 0 when
	// the books add up (DESIGN §8).
	Drift int64 `json:"drift"`
	// A SKU split into buckets: the units of transfers between its buckets
	// not yet credited, and each bucket's line (the SKU's figures above are
	// their sums).
	InFlight int64         `json:"inFlight,omitempty"`
	Buckets  []BucketStock `json:"buckets,omitempty"`
}

// BucketStock is one bucket's line of a bucketed SKU's stock report.
type BucketStock struct {
	Bucket    int    `json:"bucket"`
	Shard     string `json:"shard"`
	Initial   int64  `json:"initial"`   // its share, raised by restocks
	Remaining int64  `json:"remaining"` // its stock key
	Sold      int64  `json:"sold"`      // occupied or ordered in it
	In        int64  `json:"in"`        // units transfers credited to it
	Out       int64  `json:"out"`       // units transfers debited from it
}

// StockReport answers GET /admin/v1/activities/{id}/stock.
type StockReport struct {
	ActivityID int64      `json:"activityId"`
	State      string     `json:"state"`
	SKUs       []SKUStock `json:"skus"`
}

func (s *Server) stock(ctx *fasthttp.RequestCtx) {
	id, ok := pathInt(ctx, "id")
	if !ok {
		return
	}
	c, cancel := opCtx(ctx)
	defer cancel()
	_ = s.d.Stock.Catalog().Load(c)
	a, found := s.d.Stock.Catalog().Activity(id)
	if !found {
		writeErr(ctx, fasthttp.StatusNotFound, "NOT_FOUND", "no activity "+strconv.FormatInt(id, 10))
		return
	}
	rep := StockReport{ActivityID: id, State: a.State}
	for _, k := range a.SKUs {
		n, err := s.d.Stock.Counts(c, id, k.ID)
		if err != nil {
			s.fail(ctx, err)
			return
		}
		orders, units, err := s.d.Store.CountOrders(c, id, k.ID)
		if err != nil {
			s.fail(ctx, err)
			return
		}
		marked, err := s.d.Stock.SoldOutMarked(c, id, k.ID)
		if err != nil {
			s.fail(ctx, err)
			return
		}
		line := SKUStock{SKUID: k.ID, Hot: k.Hot, Shard: s.d.Stock.ShardName(id, k.ID), Initial: n.Initial, Remaining: n.Remaining, Ordered: units, Orders: orders, Marked: marked}
		line.Occupied = max(n.Sold-units, 0)
		line.InFlight = n.InFlight
		line.Drift = line.Ordered + line.Occupied + line.Remaining + line.InFlight - line.Initial
		line.SoldOut = marked || n.Remaining+n.InFlight <= 0
		if k.Split() {
			per, err := s.d.Stock.BucketCounts(c, id, &k)
			if err != nil {
				s.fail(ctx, err)
				return
			}
			for b, bc := range per {
				line.Buckets = append(line.Buckets, BucketStock{Bucket: b, Shard: s.d.Stock.Shards().Name(s.d.Stock.PlaceIn(id, &k, b)),
					Initial: bc.Initial, Remaining: bc.Remaining, Sold: bc.Sold, In: bc.In, Out: bc.Out})
			}
		}
		if snap, err := s.d.Store.Snapshot(c, id, k.ID); err == nil {
			line.Snapshot.Initial, line.Snapshot.Available, line.Snapshot.Sold = snap.Initial, snap.Available, snap.Sold
		} else if !errors.Is(err, store.ErrNotFound) {
			s.fail(ctx, err)
			return
		}
		rep.SKUs = append(rep.SKUs, line)
	}
	sort.Slice(rep.SKUs, func(i, j int) bool { return rep.SKUs[i].SKUID < rep.SKUs[j].SKUID })
	writeJSON(ctx, fasthttp.StatusOK, rep)
}

// Story answers GET /admin/v1/requests/{requestNo}: everything known about
// one ticket.
type Story struct {
	RequestNo string          `json:"requestNo"`
	Result    *results.Entry  `json:"result,omitempty"`
	Log       *store.LogEntry `json:"log,omitempty"`
	Order     *store.Order    `json:"order,omitempty"`
	// History is every step recorded for the ticket, oldest first
	// (DESIGN §3 states plus ORDER_PAID, ORDER_CLOSED, STOCK_RELEASED).
	History []store.Event `json:"history,omitempty"`
	// Occupancy is the ticket's hold on its SKU in Redis, when the result
	// names the SKU and the buyer.
	Occupancy *Occupancy `json:"occupancy,omitempty"`
	// Answer reads the rest in one line: where the ticket is, and why
	// there is (not yet) an order.
	Answer string `json:"answer"`
}

// Occupancy is a ticket's hold in Redis.
type Occupancy struct {
	// Held: the buyer's record names this ticket (it holds stock).
	Held bool `json:"held"`
	// Claimed: the consumer claimed it for an order.
	Claimed bool `json:"claimed"`
	// Holder is the ticket the buyer's record names, when another one.
	Holder string `json:"holder,omitempty"`
}

// answer is the one-line reading of a story.
func (st *Story) answer() string {
	switch {
	case st.Order != nil:
		return "order " + st.Order.OrderNo + " is " + st.Order.Status
	case st.Log != nil && st.Log.Status == store.StatusFailed:
		return "no order: " + st.Log.Remark
	case st.Result != nil && st.Result.State == sale.ResultFail:
		return "no order: failed with " + st.Result.Code
	case st.Occupancy != nil && st.Occupancy.Held && st.Occupancy.Claimed:
		return "the consumer claimed the ticket and is writing its order"
	case st.Occupancy != nil && st.Occupancy.Held:
		return "stock held, no order yet: the message waits in Kafka (see the lag), or, if the engine died before " +
			"producing it, the orphan sweeper releases it after the grace period"
	case st.Result != nil && st.Result.State == sale.ResultQueuing:
		return "no stock held and no order: the message will be answered FAIL when consumed"
	}
	return "no order"
}

func (s *Server) request(ctx *fasthttp.RequestCtx) {
	rn, _ := ctx.UserValue("requestNo").(string)
	if rn == "" || len(rn) > 64 {
		writeErr(ctx, fasthttp.StatusBadRequest, "BAD_REQUEST", "requestNo")
		return
	}
	c, cancel := opCtx(ctx)
	defer cancel()
	st := Story{RequestNo: rn}
	// The written result first (its owner is the buyer's); a QUEUING
	// ticket has none, its buyer's record is read once the request log or
	// the order names the buyer.
	if r, err := s.d.Results.Read(c, 0, rn); err == nil {
		st.Result = &r
	} else if !errors.Is(err, results.ErrNotFound) {
		s.fail(ctx, err)
		return
	}
	if l, err := s.d.Store.RequestLog(c, rn); err == nil {
		st.Log = &l
	} else if !errors.Is(err, store.ErrNotFound) {
		s.fail(ctx, err)
		return
	}
	if o, err := s.d.Store.OrderByRequest(c, rn); err == nil {
		st.Order = &o
	} else if !errors.Is(err, store.ErrNotFound) {
		s.fail(ctx, err)
		return
	}
	hist, err := s.d.Store.RequestEvents(c, rn)
	if err != nil {
		s.fail(ctx, err)
		return
	}
	st.History = hist
	var owner int64
	switch {
	case st.Result != nil && st.Result.Owner > 0:
		owner = st.Result.Owner
	case st.Log != nil:
		owner = st.Log.UserID
	case st.Order != nil:
		owner = st.Order.UserID
	}
	if owner > 0 && (st.Result == nil || st.Result.State == sale.ResultWaiting) {
		// As the owner: a ticket that holds stock reads QUEUING from the
		// record, whether its field is missing or still WAITING.
		if r, err := s.d.Results.Read(c, owner, rn); err == nil {
			st.Result = &r
		} else if !errors.Is(err, results.ErrNotFound) {
			s.fail(ctx, err)
			return
		}
	}
	if st.Result == nil && st.Log == nil && st.Order == nil && len(hist) == 0 {
		writeErr(ctx, fasthttp.StatusNotFound, "NOT_FOUND", "no trace of ticket "+rn)
		return
	}
	if r := st.Result; r != nil && r.Activity > 0 && r.SKU > 0 && r.Owner > 0 {
		holder, claimed, err := s.d.Stock.Holder(c, r.Activity, r.SKU, r.Owner)
		if err != nil {
			s.fail(ctx, err)
			return
		}
		st.Occupancy = &Occupancy{Held: holder == rn, Claimed: holder == rn && claimed}
		if holder != rn {
			st.Occupancy.Holder = holder
		}
	}
	st.Answer = st.answer()
	writeJSON(ctx, fasthttp.StatusOK, st)
}

func (s *Server) reconcile(ctx *fasthttp.RequestCtx) {
	if s.d.Reconcile == nil {
		writeErr(ctx, fasthttp.StatusServiceUnavailable, "UNAVAILABLE", "no reconciler configured in this process")
		return
	}
	repair := string(ctx.QueryArgs().Peek("repair")) == "true"
	c, cancel := opCtx(ctx)
	defer cancel()
	rep, err := s.d.Reconcile(c, repair)
	if err != nil {
		s.fail(ctx, err)
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, rep)
}

func (s *Server) lag(ctx *fasthttp.RequestCtx) {
	if s.d.Lag == nil {
		writeErr(ctx, fasthttp.StatusServiceUnavailable, "UNAVAILABLE", "no Kafka lag reader in this process")
		return
	}
	c, cancel := opCtx(ctx)
	defer cancel()
	ps, err := s.d.Lag.Partitions(c)
	if err != nil {
		s.fail(ctx, err)
		return
	}
	rep := LagReport{Partitions: map[string]int64{}}
	for p, n := range ps {
		rep.Partitions[strconv.Itoa(int(p))] = n
		rep.Total += n
	}
	writeJSON(ctx, fasthttp.StatusOK, rep)
}

// LagReport answers GET /admin/v1/lag: the messages of the orders topic
// not yet committed by the consumer group, in all and per partition
// (keyed by the partition number).
type LagReport struct {
	Total      int64            `json:"total"`
	Partitions map[string]int64 `json:"partitions"`
}

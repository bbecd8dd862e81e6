package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"text/tabwriter"
	"time"

	"seckill/admin"
	"seckill/admin/client"
)

// watch is `seckill admin watch ACTIVITY`, the on-call console: every
// interval it samples the admin API (the stock report, the counters the
// on-call page turns into rates, the consumer lag) and draws one frame —
// per SKU remaining, occupied, ordered, drift, units sold per second and
// the edge's accepted and rejected purchases of the SKU per second; the
// edge's accepted and rejected purchases per second in all, the lag, and the
// switches (activity ONLINE/OFFLINE, per-SKU sold-out mark). Rates need
// two samples: the first frame shows none.
type watch struct {
	c        *client.Client
	activity int64
	every    time.Duration
	count    int  // frames to draw; 0 until ctx ends
	ansi     bool // redraw in place (clear + home) instead of appending frames
	asJSON   bool // one JSON object (a watchFrame) per line instead of tables
	now      func() time.Time
}

// watchSample is what one frame is computed from.
type watchSample struct {
	at       time.Time
	stock    admin.StockReport
	accepted float64 // tickets issued by the edge, ever
	rejected float64 // purchase attempts answered anything but 200, ever
	// perSKU are the edge's purchases of each SKU, ever, keyed
	// "activity/sku" (seckill_edge_sku_purchases_total).
	perSKU map[string]skuPurchases
	lag    *admin.LagReport
	lagErr string // why there is no lag (a process without a lag reader)
}

// watchFrame is one frame: a sample, with rates from the one before.
type watchFrame struct {
	At         time.Time `json:"at"`
	ActivityID int64     `json:"activityId"`
	State      string    `json:"state"`
	// AcceptedPerSec and RejectedPerSec are null on the first frame (and
	// after a counter went back, i.e. the process restarted).
	AcceptedPerSec *float64 `json:"acceptedPerSec"`
	RejectedPerSec *float64 `json:"rejectedPerSec"`
	// Lag is null when the process has no lag reader (LagError says why).
	Lag      *int64     `json:"lag"`
	LagError string     `json:"lagError,omitempty"`
	SKUs     []watchSKU `json:"skus"`
	// Error is set on a frame whose sample failed; the console goes on.
	Error string `json:"error,omitempty"`
}

// watchSKU is a SKU's line: the stock report's, plus units sold per
// second (the change of occupied + ordered, which is Redis' sold counter)
// and the edge's accepted and rejected purchases of the SKU per second.
type watchSKU struct {
	admin.SKUStock
	SoldPerSec     *float64 `json:"soldPerSec"`
	AcceptedPerSec *float64 `json:"acceptedPerSec"`
	RejectedPerSec *float64 `json:"rejectedPerSec"`
}

// skuPurchases are one SKU's purchase counters.
type skuPurchases struct{ accepted, rejected float64 }

// The counters the rates come from (GET /admin/v1/counters, the edge of
// the process serving the admin API).
const (
	acceptedCounter = "seckill_edge_engine_calls_total"  // outcome="queued": a ticket issued
	requestsCounter = "seckill_edge_requests_total"      // purchase routes, status other than 200
	skuCounter      = "seckill_edge_sku_purchases_total" // per activity and SKU: outcome accepted or rejected
)

// purchaseRoutes are the edge's route labels of purchase attempts: the two
// order routes and the address guard that refuses before routing.
var purchaseRoutes = map[string]bool{"order": true, "submit": true, "guard": true}

func (w *watch) run(ctx context.Context, out io.Writer) error {
	tick := time.NewTicker(w.every)
	defer tick.Stop()
	var prev *watchSample
	var buf bytes.Buffer
	for n := 0; w.count == 0 || n < w.count; n++ {
		if n > 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-tick.C:
			}
		}
		cur, err := w.sample(ctx)
		if ctx.Err() != nil {
			return nil
		}
		var f watchFrame
		if err != nil {
			// A refused token or an unknown activity will not get better;
			// an unreachable or busy API may.
			if s := client.StatusOf(err); s > 0 && s < 500 {
				return err
			}
			f = watchFrame{At: w.now(), Error: err.Error()}
		} else {
			f = frame(prev, cur)
			prev = &cur
		}
		buf.Reset()
		switch {
		case w.asJSON:
			b, _ := json.Marshal(f)
			buf.Write(b)
			buf.WriteByte('\n')
		case w.ansi:
			buf.WriteString("\x1b[H\x1b[2J")
			f.table(&buf, w.every)
		default:
			if n > 0 {
				buf.WriteByte('\n')
			}
			f.table(&buf, w.every)
		}
		if _, err := out.Write(buf.Bytes()); err != nil {
			return err
		}
	}
	return nil
}

// sample reads the admin API once. The time is taken when the counters
// are read, so that rates divide by the time between two counter reads.
func (w *watch) sample(ctx context.Context) (watchSample, error) {
	ctx, cancel := context.WithTimeout(ctx, max(5*time.Second, 2*w.every))
	defer cancel()
	var s watchSample
	counters, err := w.c.Counters(ctx)
	if err != nil {
		return s, err
	}
	s.at = w.now()
	s.perSKU = map[string]skuPurchases{}
	for _, c := range counters {
		switch {
		case c.Name == skuCounter:
			k := c.Labels["activity"] + "/" + c.Labels["sku"]
			p := s.perSKU[k]
			switch c.Labels["outcome"] {
			case "accepted":
				p.accepted += c.Value
			case "rejected":
				p.rejected += c.Value
			}
			s.perSKU[k] = p
		case c.Name == acceptedCounter && c.Labels["outcome"] == "queued":
			s.accepted += c.Value
		case c.Name == requestsCounter && purchaseRoutes[c.Labels["route"]] && c.Labels["status"] != "200":
			s.rejected += c.Value
		}
	}
	if s.stock, err = w.c.Stock(ctx, w.activity); err != nil {
		return s, err
	}
	if lag, err := w.c.Lag(ctx); err == nil {
		s.lag = &lag
	} else if client.StatusOf(err) == 503 {
		s.lagErr = "no lag reader"
	} else {
		return s, err
	}
	return s, nil
}

// frame computes a frame from cur and, for the rates, the sample before
// (nil for the first).
func frame(prev *watchSample, cur watchSample) watchFrame {
	f := watchFrame{At: cur.at, ActivityID: cur.stock.ActivityID, State: cur.stock.State, LagError: cur.lagErr}
	if cur.lag != nil {
		f.Lag = &cur.lag.Total
	}
	var dt float64
	if prev != nil {
		dt = cur.at.Sub(prev.at).Seconds()
	}
	// rate is nil without a previous sample or when the counter went
	// back (the process restarted between the samples).
	rate := func(before, now float64) *float64 {
		if dt <= 0 || now < before {
			return nil
		}
		r := (now - before) / dt
		return &r
	}
	if prev != nil {
		f.AcceptedPerSec = rate(prev.accepted, cur.accepted)
		f.RejectedPerSec = rate(prev.rejected, cur.rejected)
	}
	before := map[int64]int64{}
	if prev != nil {
		for _, s := range prev.stock.SKUs {
			before[s.SKUID] = s.Occupied + s.Ordered
		}
	}
	for _, s := range cur.stock.SKUs {
		line := watchSKU{SKUStock: s}
		if b, ok := before[s.SKUID]; ok {
			line.SoldPerSec = rate(float64(b), float64(s.Occupied+s.Ordered))
		}
		k := strconv.FormatInt(cur.stock.ActivityID, 10) + "/" + strconv.FormatInt(s.SKUID, 10)
		if now, ok := cur.perSKU[k]; ok && prev != nil {
			if b, ok := prev.perSKU[k]; ok {
				// Either counter going back means the edge restarted:
				// neither rate is then known.
				if a, r := rate(b.accepted, now.accepted), rate(b.rejected, now.rejected); a != nil && r != nil {
					line.AcceptedPerSec, line.RejectedPerSec = a, r
				}
			}
		}
		f.SKUs = append(f.SKUs, line)
	}
	return f
}

// table draws f for a terminal or a log.
func (f watchFrame) table(out io.Writer, every time.Duration) {
	if f.Error != "" {
		fmt.Fprintf(out, "%s  admin API: %s (retrying every %s)\n", f.At.Format("15:04:05"), f.Error, every)
		return
	}
	fmt.Fprintf(out, "activity %d  %s  %s  (every %s, Ctrl-C stops)\n", f.ActivityID, f.State, f.At.Format("15:04:05"), every)
	lag := "n/a (" + f.LagError + ")"
	if f.Lag != nil {
		lag = strconv.FormatInt(*f.Lag, 10)
	}
	fmt.Fprintf(out, "accepted/s %s  rejected/s %s  lag %s\n", perSec(f.AcceptedPerSec), perSec(f.RejectedPerSec), lag)
	w := tabwriter.NewWriter(out, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "SKU\tHOT\tSHARD\tINITIAL\tREMAINING\tOCCUPIED\tORDERED\tDRIFT\tSOLD/S\tACCEPTED/S\tREJECTED/S\tSOLD OUT\tMARK\t")
	for _, s := range f.SKUs {
		mark := "off"
		if s.Marked {
			mark = "on"
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t\n", s.SKUID, yesNo(s.Hot), s.Shard, s.Initial, s.Remaining,
			s.Occupied, s.Ordered, s.Drift, perSec(s.SoldPerSec), perSec(s.AcceptedPerSec), perSec(s.RejectedPerSec), yesNo(s.SoldOut), mark)
	}
	w.Flush()
}

// perSec prints a rate, or "-" where there is none yet.
func perSec(r *float64) string {
	if r == nil {
		return "-"
	}
	return strconv.FormatFloat(*r, 'f', 1, 64)
}

// isTerminal reports whether out is a character device (a terminal), where
// the console redraws in place; into a pipe or a file it appends frames.
func isTerminal(out io.Writer) bool {
	f, ok := out.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

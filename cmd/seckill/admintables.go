package main

import (
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"seckill/admin"
	"seckill/sale"
)

// The tables `seckill admin` prints, one per answer of the admin API
// (--json prints the answer itself).

func table(out io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(out, 2, 4, 2, ' ', 0) }

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func renderStock(rep admin.StockReport, out io.Writer) error {
	fmt.Fprintf(out, "activity %d  %s\n", rep.ActivityID, rep.State)
	w := tabwriter.NewWriter(out, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "SKU\tHOT\tSHARD\tINITIAL\tREMAINING\tOCCUPIED\tORDERED\tORDERS\tSOLD OUT\tDRIFT\t")
	for _, s := range rep.SKUs {
		so := fmt.Sprint(s.SoldOut)
		if s.Marked {
			so += " (marked)"
		}
		fmt.Fprintf(w, "%d\t%v\t%s\t%d\t%d\t%d\t%d\t%d\t%s\t%d\t\n", s.SKUID, s.Hot, s.Shard, s.Initial, s.Remaining, s.Occupied, s.Ordered, s.Orders, so, s.Drift)
	}
	return w.Flush()
}

// renderActivity prints the one activity that create and state answer.
func renderActivity(a sale.Activity, out io.Writer) error {
	return renderActivities([]sale.Activity{a}, out)
}

// renderActivities prints the catalog.
func renderActivities(acts []sale.Activity, out io.Writer) error {
	if len(acts) == 0 {
		return errors.New("no activities")
	}
	sort.Slice(acts, func(i, j int) bool { return acts[i].ID < acts[j].ID })
	w := table(out)
	fmt.Fprintln(w, "ID\tSTATE\tSTART\tEND\tTOKEN\tSKUS")
	for _, a := range acts {
		var skus []string
		for _, s := range a.SKUs {
			h := ""
			if s.Hot {
				h = " hot"
			}
			if s.HotShard != nil {
				h += fmt.Sprintf("@hot%d", *s.HotShard)
			}
			skus = append(skus, fmt.Sprintf("%d×%d@%s%s", s.ID, s.Stock, s.Price, h))
		}
		state := a.State
		if state == "" {
			state = sale.StateOnline
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%v\t%s\n", a.ID, state, a.Start.Format(time.RFC3339), a.End.Format(time.RFC3339),
			a.RequireToken, strings.Join(skus, " "))
	}
	return w.Flush()
}

func renderSoldOut(v admin.SoldOutAnswer, out io.Writer) error {
	w := table(out)
	fmt.Fprintln(w, "ACTIVITY\tSKU\tMARK\tSOLD OUT\tREMAINING")
	mark := "off"
	if v.Marked {
		mark = "on"
	}
	fmt.Fprintf(w, "%d\t%d\t%s\t%s\t%d\n", v.ActivityID, v.SKUID, mark, yesNo(v.SoldOut), v.Remaining)
	return w.Flush()
}

func renderRestock(v admin.RestockAnswer, out io.Writer) error {
	w := table(out)
	fmt.Fprintln(w, "ACTIVITY\tSKU\tADDED\tREMAINING\tINITIAL")
	fmt.Fprintf(w, "%d\t%d\t%d\t%d\t%d\n", v.ActivityID, v.SKUID, v.Added, v.Remaining, v.Initial)
	return w.Flush()
}

// renderStory prints a ticket's story: what it is in one line, then the
// result, request log, order and Redis hold, then its history.
func renderStory(st admin.Story, out io.Writer) error {
	w := table(out)
	fmt.Fprintf(w, "ticket\t%s\n", st.RequestNo)
	fmt.Fprintf(w, "answer\t%s\n", st.Answer)
	if r := st.Result; r != nil {
		line := r.State
		if r.OrderNo != "" {
			line += "  order " + r.OrderNo
		}
		if r.Code != "" {
			line += "  code " + r.Code
		}
		fmt.Fprintf(w, "result\t%s  (activity %d, sku %d, user %d)\n", line, r.Activity, r.SKU, r.Owner)
	} else {
		fmt.Fprintln(w, "result\tnone in Redis")
	}
	if l := st.Log; l != nil {
		line := l.Status
		if l.Remark != "" {
			line += "  " + l.Remark
		}
		fmt.Fprintf(w, "request log\t%s  (trace %s, updated %s)\n", line, l.TraceID, l.Updated.Format(time.RFC3339))
	} else {
		fmt.Fprintln(w, "request log\tnone")
	}
	if o := st.Order; o != nil {
		fmt.Fprintf(w, "order\t%s  %s  activity %d, sku %d, user %d, %d × %s = %s, created %s\n", o.OrderNo, o.Status,
			o.ActivityID, o.SKUID, o.UserID, o.Quantity, o.UnitPrice, o.Amount, o.Created.Format(time.RFC3339))
	} else {
		fmt.Fprintln(w, "order\tnone")
	}
	if h := st.Occupancy; h != nil {
		line := "not held"
		switch {
		case h.Held && h.Claimed:
			line = "held, claimed by the consumer"
		case h.Held:
			line = "held"
		case h.Holder != "":
			line = "not held: the buyer's record names ticket " + h.Holder
		}
		fmt.Fprintf(w, "stock hold\t%s\n", line)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if len(st.History) == 0 {
		return nil
	}
	fmt.Fprintln(out)
	w = table(out)
	fmt.Fprintln(w, "AT\tSTEP\tREMARK")
	for _, e := range st.History {
		fmt.Fprintf(w, "%s\t%s\t%s\n", e.At.Format("2006-01-02T15:04:05.000Z07:00"), e.Status, e.Remark)
	}
	return w.Flush()
}

func renderLag(rep admin.LagReport, out io.Writer) error {
	parts := make([]int, 0, len(rep.Partitions))
	for p := range rep.Partitions {
		n, err := strconv.Atoi(p)
		if err != nil {
			return fmt.Errorf("lag: partition %q", p)
		}
		parts = append(parts, n)
	}
	sort.Ints(parts)
	w := tabwriter.NewWriter(out, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "PARTITION\tLAG\t")
	for _, p := range parts {
		fmt.Fprintf(w, "%d\t%d\t\n", p, rep.Partitions[strconv.Itoa(p)])
	}
	fmt.Fprintf(w, "total\t%d\t\n", rep.Total)
	return w.Flush()
}

func renderBlocklist(v admin.BlocklistView, out io.Writer) error {
	w := table(out)
	fmt.Fprintln(w, "KIND\tENTRY\tSOURCE")
	for _, ip := range v.IPs {
		fmt.Fprintf(w, "ip\t%s\tadmin\n", ip)
	}
	for _, ip := range v.Configured.IPs {
		fmt.Fprintf(w, "ip\t%s\tconfig\n", ip)
	}
	for _, u := range v.Users {
		fmt.Fprintf(w, "user\t%d\tadmin\n", u)
	}
	for _, u := range v.Configured.Users {
		fmt.Fprintf(w, "user\t%d\tconfig\n", u)
	}
	return w.Flush()
}

func renderBlock(v admin.BlockAnswer, out io.Writer) error {
	kind, entry := "ip", v.IP
	if v.IP == "" {
		kind, entry = "user", strconv.FormatInt(v.User, 10)
	}
	state := "blocked"
	if !v.Blocked {
		state = "not blocked"
	}
	w := table(out)
	fmt.Fprintln(w, "KIND\tENTRY\tSTATE\tCHANGED")
	fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", kind, entry, state, yesNo(v.Changed))
	if err := w.Flush(); err != nil {
		return err
	}
	if v.Note != "" {
		fmt.Fprintf(out, "note: %s\n", v.Note)
	}
	return nil
}

func renderDegrade(vs []admin.DegradeView, out io.Writer) error {
	w := table(out)
	fmt.Fprintln(w, "ACTIVITY\tRESERVED ONLY\tRESERVED USERS\tPOLL AFTER\tPAUSED")
	for _, v := range vs {
		poll := "default"
		if v.PollAfterMs > 0 {
			poll = (time.Duration(v.PollAfterMs) * time.Millisecond).String()
		}
		fmt.Fprintf(w, "%d\t%s\t%d\t%s\t%s\n", v.ActivityID, yesNo(v.ReservedOnly), v.Reserved, poll, yesNo(v.Paused))
	}
	return w.Flush()
}

func renderRoutes(vs []admin.RouteView, out io.Writer) error {
	w := table(out)
	fmt.Fprintln(w, "ROUTE\tSTATE")
	for _, v := range vs {
		st := "open"
		if !v.Open {
			st = "CLOSED (503 + Retry-After)"
		}
		fmt.Fprintf(w, "%s\t%s\n", v.Name, st)
	}
	return w.Flush()
}

func renderUnchecked(v admin.UncheckedView, out io.Writer) error {
	fmt.Fprintf(out, "%d purchase(s) passed without a risk verdict (%d shown)\n", v.Total, len(v.Records))
	w := table(out)
	fmt.Fprintln(w, "REQUEST NO\tUSER\tACTIVITY\tSKU\tQTY\tIP\tDEVICE\tWHY\tAT\tRE-CHECK\tACTION")
	for _, r := range v.Records {
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", r.RequestNo, r.User, r.Activity, r.SKU, r.Quantity,
			dash(r.IP), dash(r.Device), r.Why, time.UnixMilli(r.At).UTC().Format(time.RFC3339), r.State, dash(r.Action))
	}
	return w.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// renderWhy prints a buyer's attempts and tickets, newest first: one line
// each, the steps of its history beneath.
func renderWhy(rep admin.UserRequests, out io.Writer) error {
	scope := "every activity"
	if rep.ActivityID != 0 {
		scope = "activity " + strconv.FormatInt(rep.ActivityID, 10)
	}
	fmt.Fprintf(out, "user %d, %s: %d entries\n", rep.UserID, scope, len(rep.Requests))
	w := table(out)
	fmt.Fprintln(w, "AT\tACTIVITY\tSKU\tQTY\tOUTCOME\tREASON\tTICKET\tORDER\tTRACE")
	for _, r := range rep.Requests {
		order := r.OrderNo
		if r.Order != nil {
			order += " (" + r.Order.Status + ")"
		}
		ticket := r.RequestNo
		if strings.HasPrefix(ticket, "R-") {
			ticket = "-" // a refused attempt: no ticket was handed out
		}
		reason := r.Reason
		if reason == "" {
			reason = "-"
		}
		if order == "" {
			order = "-"
		}
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\n", r.Created.Format("2006-01-02T15:04:05.000Z07:00"),
			r.ActivityID, r.SKUID, r.Quantity, r.Outcome, reason, ticket, order, r.TraceID)
		for _, e := range r.History {
			// The steps beneath: time, step, remark.
			fmt.Fprintf(w, "  %s\t\t\t\t%s\t%s\t\t\t\n", e.At.Format("15:04:05.000"), e.Status, e.Remark)
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if rep.Next != "" {
		fmt.Fprintf(out, "more: seckill admin why %d", rep.UserID)
		if rep.ActivityID != 0 {
			fmt.Fprintf(out, " %d", rep.ActivityID)
		}
		fmt.Fprintf(out, " --cursor %s\n", rep.Next)
	}
	return nil
}

// renderRisk says what the activity's risk policy now does.
func renderRisk(v admin.RiskAnswer, out io.Writer) error {
	what := "purchases pass by the local rules, recorded and re-checked once it is back (seckill admin risk unchecked)"
	if v.OnError == sale.RiskDeny {
		what = "purchases are answered 503 BUSY"
	}
	_, err := fmt.Fprintf(out, "activity %d: when the risk service times out or fails, %s\n", v.ActivityID, what)
	return err
}

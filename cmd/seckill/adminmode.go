package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"seckill/admin"
	"seckill/admin/client"
	"seckill/sale"
)

// adminMode is `seckill admin mode [SKU [direct|queue] [rate=N]
// [activity=A]]`: every SKU's mode, one SKU's, or a switch of one.
// Arguments are checked before the call.
func adminMode(ctx context.Context, c *client.Client, args []string) (func(io.Writer) error, error) {
	if len(args) == 0 {
		return shown(renderModes)(c.Modes(ctx))
	}
	sku, err := idArg("mode", "sku", args[0])
	if err != nil {
		return nil, err
	}
	var ch admin.ModeChange
	for _, a := range args[1:] {
		k, v, kv := strings.Cut(a, "=")
		switch {
		case !kv && (a == sale.ModeQueue || a == sale.ModeDirect):
			ch.Mode = &a
		case kv && k == "rate":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return nil, fmt.Errorf("mode: rate %q must be attempts per second, 0 or more", v)
			}
			ch.Rate = &n
		case kv && k == "activity":
			if ch.ActivityID, err = idArg("mode", "activity", v); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("mode: %q is none of direct, queue, rate=N, activity=A", a)
		}
	}
	one := func(v admin.ModeView, out io.Writer) error { return renderModes([]admin.ModeView{v}, out) }
	if ch.Mode == nil && ch.Rate == nil {
		return shown(one)(c.Mode(ctx, sku, ch.ActivityID))
	}
	return shown(one)(c.SetMode(ctx, sku, ch))
}

// renderModes prints one line per SKU: its mode and the queue's pace
// ("shard": as fast as the SKU's shard allows).
func renderModes(vs []admin.ModeView, out io.Writer) error {
	w := table(out)
	fmt.Fprintln(w, "ACTIVITY\tSKU\tMODE\tRATE/S")
	for _, v := range vs {
		rate := "shard"
		if v.Rate > 0 {
			rate = strconv.FormatInt(v.Rate, 10)
		}
		fmt.Fprintf(w, "%d\t%d\t%s\t%s\n", v.ActivityID, v.SKUID, v.Mode, rate)
	}
	return w.Flush()
}

// adminPrequeue is `seckill admin prequeue SKU [activity=A] [order]`: the
// record of the SKU's pre-queue draw, with the order served when asked.
func adminPrequeue(ctx context.Context, c *client.Client, args []string) (func(io.Writer) error, error) {
	if len(args) == 0 {
		return nil, fmt.Errorf("prequeue needs a SKU; see seckill admin help")
	}
	sku, err := idArg("prequeue", "sku", args[0])
	if err != nil {
		return nil, err
	}
	var activity int64
	order := false
	for _, a := range args[1:] {
		k, v, kv := strings.Cut(a, "=")
		switch {
		case !kv && a == "order":
			order = true
		case kv && k == "activity":
			if activity, err = idArg("prequeue", "activity", v); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("prequeue: %q is none of activity=A, order", a)
		}
	}
	return shown(renderPrequeue)(c.Prequeue(ctx, sku, activity, order))
}

// renderPrequeue prints the draw's record in one line (and the order
// served, asked for, in the next).
func renderPrequeue(v admin.PrequeueView, out io.Writer) error {
	w := table(out)
	fmt.Fprintln(w, "ACTIVITY\tSKU\tPREQUEUE\tDRAWN\tSEED\tPARTITION\tCUTOFF\tSERVED\tDONE")
	seed, part, cutoff := "-", "-", "-"
	if v.Drawn {
		seed, part, cutoff = v.Seed, strconv.Itoa(int(v.Partition)), strconv.FormatInt(v.Cutoff, 10)
	}
	fmt.Fprintf(w, "%d\t%d\t%dm\t%v\t%s\t%s\t%s\t%d\t%v\n", v.ActivityID, v.SKUID, v.Prequeue, v.Drawn, seed, part, cutoff, v.Served, v.Done)
	if err := w.Flush(); err != nil {
		return err
	}
	if v.Order != nil {
		_, err := fmt.Fprintf(out, "order: %s\n", sale.AppendOrder(nil, v.Order))
		return err
	}
	return nil
}

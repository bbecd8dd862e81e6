package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"seckill/catalog"
	"seckill/cmd/seckill/config"
	"seckill/internal/lag"
	"seckill/internal/shard"
	"seckill/reconcile"
	"seckill/stock"
	"seckill/stock/results"
	"seckill/store"
)

// runReconcile is `seckill reconcile [--repair] [--json] [--config FILE]`:
// one reconciliation against the configured Redis, database and Kafka,
// printed per SKU. With --repair the safe repairs are applied and a second
// pass shows what is left. It fails (exit 1) while drift remains.
func runReconcile(args []string, out io.Writer) error {
	fs, path := newFlags("reconcile")
	repair := fs.Bool("repair", false, "apply the provably safe repairs, then report what is left")
	asJSON := fs.Bool("json", false, "print the reports as JSON")
	timeout := fs.Duration("timeout", 5*time.Minute, "bound on the whole run")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, log, err := loadConfig(config.Load, *path)
	if err != nil {
		return err
	}
	defer log.Sync()
	if err := cfg.Validate(); err != nil {
		return err
	}
	// Redis and the database must answer (a Redis that restarted on a large
	// file is loading for a while); Kafka is optional, as below.
	deps := shard.Dependencies(cfg.Redis)
	if cfg.Store.Driver == "mysql" {
		deps = append(deps, databaseDependency(cfg))
	}
	up := announce(log, startLine{role: "reconcile", redis: redisAddrs(cfg.Redis), brokers: cfg.Consumer.Brokers,
		store: cfg.Store.Driver, dsn: redactDSN(cfg.Store.Driver, cfg.Store.DSN)})
	if ok, err := startProbe().wait(cfg, log, deps); !ok {
		if err == nil {
			err = errors.New("stopped while waiting for Redis and the database")
		}
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	shards, err := shard.Open(cfg.Redis)
	if err != nil {
		return err
	}
	defer shards.Close()
	st, err := store.Open(cfg.Store)
	if err != nil {
		return err
	}
	defer st.Close()
	var through reconcile.Through
	if l, err := lag.New(cfg.Consumer.Brokers, cfg.Consumer.Group, cfg.Consumer.Topic); err == nil {
		defer l.Close()
		through = l
	} else {
		fmt.Fprintf(os.Stderr, "seckill reconcile: no Kafka (%v): no occupancy is judged stale\n", err)
	}
	up.ready()
	// A repair that gives a ticket back counts its attempt in the user ×
	// SKU window, as the running parts' releases do.
	stock := stock.New(shards, catalog.New(shards.Default),
		stock.WithWindow(cfg.Edge.Rate.UserSKULimit, cfg.Edge.Rate.UserSKUWindow))
	r := reconcile.New(cfg.ReconcileConfig(), stock, st, results.New(shards.Default, stock.BucketClient, cfg.Engine.ResultTTL), through, log.Named("reconcile"), nil)
	// A SKU that could not be compared (its shard down) fails the command,
	// after the report of the SKUs that could.
	rep, runErr := r.Run(ctx, *repair)
	reps := []reconcile.Report{rep}
	if *repair && runErr == nil {
		after, err := r.Run(ctx, false)
		reps, runErr = append(reps, after), err
	}
	if *asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(reps); err != nil {
			return err
		}
	} else {
		for i, rp := range reps {
			if i > 0 {
				fmt.Fprintln(out, "\nafter repair:")
			}
			renderReconcile(rp, out)
		}
	}
	if runErr != nil {
		return runErr
	}
	if left := reps[len(reps)-1].Drifts; left > 0 {
		return fmt.Errorf("%d drifts left (see docs/operations-ledger.md)", left)
	}
	return nil
}

func renderReconcile(rp reconcile.Report, out io.Writer) {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ACTIVITY\tSKU\tREDIS init/rem/sold/records/claimed\tDB init/avail/sold\tORDERS/UNITS\tDRIFT")
	for _, l := range rp.SKUs {
		redis := "missing"
		if l.Redis.Present {
			redis = fmt.Sprintf("%d/%d/%d/%d/%d", l.Redis.Initial, l.Redis.Remaining, l.Redis.Sold, l.Redis.Records, l.Redis.Claimed)
		}
		fmt.Fprintf(w, "%d\t%d\t%s\t%d/%d/%d\t%d/%d\t%d\n", l.ActivityID, l.SKUID, redis, l.DB.Initial, l.DB.Available,
			l.DB.Sold, l.DB.Orders, l.DB.Units, len(l.Drifts))
	}
	w.Flush()
	for _, l := range rp.SKUs {
		for _, d := range l.Drifts {
			fmt.Fprintf(out, "drift   activity %d sku %d %-22s %+d  %s\n", l.ActivityID, l.SKUID, d.Kind, d.Amount, d.Detail)
		}
		for _, x := range l.Repairs {
			fmt.Fprintf(out, "repair  activity %d sku %d %-22s %+d  %s\n", l.ActivityID, l.SKUID, x.Kind, x.Amount, x.Detail)
		}
	}
	for _, warn := range rp.Warnings {
		fmt.Fprintln(out, "warning:", warn)
	}
	fmt.Fprintf(out, "%d SKUs, %d drifts, %d repairs\n", len(rp.SKUs), rp.Drifts, rp.Repairs)
}

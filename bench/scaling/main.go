// Command scaling measures the per-part ceilings docs/SCALING.md's capacity
// model is built from, each part on its own on this machine, and prints
// each figure with the command that made it:
//
//	go run ./bench/scaling                 # every part, 10 s each
//	go run ./bench/scaling -d 30s -only edge,redis
//
// Parts (-only): edge (reject/s and accept/s per core: wrk against `seckill
// edge` with GOMAXPROCS=1 and the engine in process), consumer (orders/s
// per core: `seckill consumer` with GOMAXPROCS=1 draining the edge run's
// tickets into MariaDB; needs edge), redis (buyers/s per shard with group
// commit: OccupyBatch loops against one redis-server, from its CPU per
// buyer, next to seed 001 §9.2's script with one EVALSHA a buyer, the
// yardstick, measured in the same run), buckets (one SKU in 1, 2 and 4
// buckets over two redis-servers: buyers per core of their CPU, each
// shard's CPU per buyer, the split of script calls), kafka (produce/s and consume/s per broker core: Sarama against
// `seckill broker`), db (rows/s batched into MariaDB, the INSERT IGNORE
// reference). Run it from the repository root on a quiet machine; the
// figures are only as good as the machine is idle. Logs and wrk reports
// go to -out.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"seckill/bench/benchkit"
)

type options struct {
	dur             time.Duration
	threads, conns  int
	out, root, bin  string
	config          string
	only            []string
	batch, workers  int
	partitions      int
	dbRows, dbBatch int
	window          bool
}

func (o options) runs(part string) bool { return len(o.only) == 0 || slices.Contains(o.only, part) }

var parts = []string{"edge", "consumer", "redis", "buckets", "kafka", "db"}

func main() {
	var o options
	var only string
	flag.DurationVar(&o.dur, "d", 10*time.Second, "duration of each measurement")
	flag.IntVar(&o.threads, "t", 2, "wrk threads")
	flag.IntVar(&o.conns, "c", 256, "wrk connections")
	flag.StringVar(&o.out, "out", "bench/out/scaling", "directory for logs and wrk reports")
	flag.StringVar(&o.config, "config", "configs/bench.yaml", "configuration of the seckill processes")
	flag.StringVar(&only, "only", "", "comma-separated parts to measure ("+strings.Join(parts, ",")+"); empty: all")
	flag.IntVar(&o.batch, "batch", 64, "redis: buyers per occupy script call (the group commit's batch)")
	flag.IntVar(&o.workers, "workers", 4, "redis: concurrent callers (engines) of one SKU; kafka: producers")
	flag.IntVar(&o.partitions, "partitions", 12, "partitions of the orders topic on seckill broker")
	flag.IntVar(&o.dbRows, "db-rows", 200000, "db: rows written")
	flag.IntVar(&o.dbBatch, "db-batch", 500, "db: rows per statement and transaction (consumer.batch_size)")
	flag.BoolVar(&o.window, "window", true, "redis: count the user × SKU window in the occupy call, as the engine does with the dev defaults (false: no window, to see its price)")
	flag.StringVar(&o.bin, "seckill", "", "a prebuilt seckill binary instead of building ./cmd/seckill")
	flag.Parse()
	if only != "" {
		o.only = strings.Split(only, ",")
		for _, p := range o.only {
			if !slices.Contains(parts, p) {
				fatal(fmt.Errorf("-only: unknown part %q (parts: %s)", p, strings.Join(parts, ",")))
			}
		}
		if o.runs("consumer") && !o.runs("edge") {
			fatal(fmt.Errorf("-only consumer needs edge too: the consumer drains the edge run's tickets"))
		}
	}
	root, err := os.Getwd()
	if err != nil {
		fatal(err)
	}
	o.root = root
	benchkit.Main("scaling", func() error { return run(&o) }, benchkit.StopAll)
}

// db is the MariaDB the run started, if any (benchkit.StopAll stops it).
var db *benchkit.MariaDB

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "scaling:", err)
	os.Exit(1)
}

func logf(f string, a ...any) { fmt.Fprintf(os.Stderr, "scaling: "+f+"\n", a...) }

func run(o *options) error {
	out, err := filepath.Abs(o.out)
	if err != nil {
		return err
	}
	o.out = out
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	if _, err := benchkit.RaiseFileLimit(); err != nil {
		return fmt.Errorf("raise the open-file limit: %w", err)
	}
	if o.bin == "" {
		o.bin = filepath.Join(out, "bin", "seckill")
		logf("go build -o %s ./cmd/seckill", o.bin)
		build := exec.Command("go", "build", "-o", o.bin, "./cmd/seckill")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("go build: %w", err)
		}
	}
	var figs []figure
	if o.runs("redis") {
		f, err := measureRedis(*o)
		if err != nil {
			return fmt.Errorf("redis: %w", err)
		}
		figs = append(figs, f...)
		// The yardstick, measured in the same run.
		ref, err := measureSeedRedis(*o, f)
		if err != nil {
			return fmt.Errorf("redis (seed script): %w", err)
		}
		figs = append(figs, ref...)
	}
	if o.runs("buckets") {
		f, err := measureBuckets(*o)
		if err != nil {
			return fmt.Errorf("buckets: %w", err)
		}
		figs = append(figs, f...)
	}
	if o.runs("kafka") {
		f, err := measureKafka(*o)
		if err != nil {
			return fmt.Errorf("kafka: %w", err)
		}
		figs = append(figs, f...)
	}
	if o.runs("edge") || o.runs("consumer") || o.runs("db") {
		logf("starting MariaDB")
		if db, err = benchkit.StartMariaDB(); err != nil {
			return err
		}
	}
	if o.runs("edge") {
		f, err := measureEdgeAndConsumer(*o, db.DSN)
		figs = append(figs, f...)
		if err != nil {
			return fmt.Errorf("edge: %w", err)
		}
	}
	if o.runs("db") {
		logf("db: %d rows in batches of %d", o.dbRows, o.dbBatch)
		ref, err := benchkit.MySQLInsertRef(db.DSN, o.dbRows, o.dbBatch)
		if err != nil {
			return fmt.Errorf("db: %w", err)
		}
		figs = append(figs, figure{part: "database", what: "rows/s batched (MariaDB)", ceiling: ref.Rate(), seen: ref.Rate(),
			note: fmt.Sprintf("%d rows in %v, %d a transaction, seckill_order's unique keys", ref.Rows, ref.Took.Round(time.Millisecond), ref.Batch),
			cmd:  fmt.Sprintf("go run ./bench/scaling -only db -db-rows %d -db-batch %d (multi-row INSERT IGNORE, one transaction a batch)", o.dbRows, o.dbBatch)})
	}
	fmt.Print(render(*o, figs))
	return nil
}

// machine names what the figures were measured on.
func machine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "model name"); ok {
				model = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	return fmt.Sprintf("%s, %d cores, %s", model, runtime.NumCPU(), runtime.Version())
}

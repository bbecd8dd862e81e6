package main

import (
	"fmt"
	"os/exec"
	"strconv"
	"strings"
)

// seckill dev runs the edge, the engine, the embedded broker, the consumer
// and SQLite in one process: /proc gives their sum only. The breakdown
// splits that sum by (a)'s CPU profile: each sample belongs to the first
// part, in the order below, one of whose functions is on its stack (the
// broker's goroutines never call the others; the consumer calls the
// database, the edge calls the engine, so the callee's part is tried
// first). Samples with no part's frame — the garbage collector, the
// scheduler, idle syscalls — are "runtime".

// part is one row of the split: the functions (a pprof -focus regexp)
// whose samples it takes.
type part struct {
	name, funcs string
}

var devParts = []part{
	{"broker", `^github\.com/twmb/franz-go/pkg/kfake\.|^seckill/cmd/seckill/devserver\.`},
	{"database", `^modernc\.org/sqlite|^modernc\.org/libc|^database/sql\.|^seckill/store\.`},
	{"consumer", `^seckill/consumer\.|^github\.com/IBM/sarama\.\(\*(consumerGroup|consumerGroupSession|consumerGroupClaim|partitionConsumer|brokerConsumer|consumer|offsetManager|partitionOffsetManager)\)`},
	{"engine", `^seckill/engine\.|^seckill/stock\.|^github\.com/IBM/sarama\.\(\*(asyncProducer|syncProducer|topicProducer|partitionProducer|brokerProducer|produceSet)\)`},
	{"edge", `^seckill/edge\.|^github\.com/valyala/fasthttp|^github\.com/fasthttp/router`},
	// The clients' own goroutines (rueidis' pipelines, Sarama's broker
	// connections) serve the engine and the consumer alike.
	{"redis client", `^github\.com/redis/rueidis`},
	{"kafka client", `^github\.com/IBM/sarama`},
}

// breakdown is the share of a CPU profile's samples per part, runtime
// last.
type breakdown struct {
	shares []float64 // by devParts, then runtime
	total  float64   // seconds of samples in the profile
}

func (b breakdown) ok() bool { return b.total > 0 && len(b.shares) > 0 }

// profileSeconds is the sample time `go tool pprof -top` shows for the
// profile with focus and ignore regexps ("" for none).
func profileSeconds(bin, prof, focus, ignore string) (float64, error) {
	args := []string{"tool", "pprof", "-top", "-nodecount=1000000", "-nodefraction=0"}
	if focus != "" {
		args = append(args, "-focus="+focus)
	}
	if ignore != "" {
		args = append(args, "-ignore="+ignore)
	}
	out, err := exec.Command("go", append(args, bin, prof)...).CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("pprof: %v: %s", err, out)
	}
	return parseShowing(string(out)), nil
}

// parseShowing reads "Showing nodes accounting for 1.23s, …" (or ms); no
// such line (nothing matched) is 0.
func parseShowing(top string) float64 {
	m := reShowing.FindStringSubmatch(top)
	if m == nil {
		return 0
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	if m[2] == "ms" {
		v /= 1000
	}
	return v
}

// splitProfile measures the shares of parts (devParts for seckill dev) of
// the CPU profile prof of bin.
func splitProfile(bin, prof string, parts []part) (breakdown, error) {
	total, err := profileSeconds(bin, prof, "", "")
	if err != nil || total <= 0 {
		return breakdown{}, err
	}
	b := breakdown{total: total}
	var taken float64
	var earlier []string
	for _, p := range parts {
		v, err := profileSeconds(bin, prof, p.funcs, strings.Join(earlier, "|"))
		if err != nil {
			return breakdown{}, err
		}
		b.shares = append(b.shares, v/total)
		taken += v
		earlier = append(earlier, p.funcs)
	}
	b.shares = append(b.shares, max(total-taken, 0)/total)
	return b, nil
}

// renderBreakdown writes the CPU per accepted buyer of each part of c
// (seckill dev's process split by b, each redis-server from /proc), the
// form bench/RESULTS.md's table takes.
func renderBreakdown(sb *strings.Builder, c cost, b breakdown, ref cost) {
	if !c.ok() || !b.ok() || len(b.shares) != len(devParts)+1 {
		return
	}
	proc := c.perBuyer(roleServer)
	fmt.Fprintf(sb, "\nCPU per accepted buyer by part, %s (µs; the process' /proc CPU per buyer split by the shares of its CPU\n", c.name)
	sb.WriteString("profile, each sample to the first part with a frame on its stack: broker, database, consumer, engine, edge, then the\n")
	sb.WriteString("Redis and Kafka clients' own goroutines, which serve engine and consumer alike; runtime = GC, scheduler and\n")
	sb.WriteString("syscalls with no part's frame; each redis-server from /proc):\n\n")
	sb.WriteString("| part | µs per accepted buyer | share of seckill | vs ref server + Redis per request |\n|---|---:|---:|---:|\n")
	refAll := ref.perBuyer()
	line := func(name string, us, share float64) {
		sh := "-"
		if share >= 0 {
			sh = fmt.Sprintf("%.0f%%", 100*share)
		}
		fmt.Fprintf(sb, "| %s | %.1f | %s | %s |\n", name, us, sh, ratio(us, refAll))
	}
	for i, p := range devParts {
		line(p.name, proc*b.shares[i], b.shares[i])
	}
	line("runtime", proc*b.shares[len(devParts)], b.shares[len(devParts)])
	line("**seckill dev process**", proc, 1)
	for _, r := range c.redisRoles() {
		line(r, c.perBuyer(r), -1)
	}
	line("**all**", c.perBuyer(), -1)
	fmt.Fprintf(sb, "- %s: %.1f µs per request (server %.1f, Redis %.1f)\n", ref.name, refAll, ref.perBuyer(roleServer), ref.perBuyer(roleRedisDef, roleRedisHot))
}

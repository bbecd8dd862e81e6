package main

import (
	"fmt"
	"strings"
	"time"

	"seckill/bench/benchkit"
)

// figure is one measured ceiling: what one core of the part sustains
// (ceiling), what the run saw in all (seen, per second of wall time), and
// the command that made it.
type figure struct {
	part, what string
	ceiling    float64 // per core of the part's process
	seen       float64 // per second of the run
	note       string
	cmd        string
}

// cpuWindow is the CPU a process used over a stretch of wall time.
type cpuWindow struct {
	pid   int
	cpu0  time.Duration
	wall0 time.Time
}

func startCPU(pid int) (cpuWindow, error) {
	d, err := benchkit.ProcCPU(pid)
	return cpuWindow{pid: pid, cpu0: d, wall0: time.Now()}, err
}

// stop is the CPU used and the wall time passed since startCPU.
func (w cpuWindow) stop() (cpu, wall time.Duration, err error) {
	d, err := benchkit.ProcCPU(w.pid)
	return d - w.cpu0, time.Since(w.wall0), err
}

// perCore is n events per second of the process' CPU.
func perCore(n int64, cpu time.Duration) float64 {
	if cpu <= 0 {
		return 0
	}
	return float64(n) / cpu.Seconds()
}

// notBound flags a run whose process used under 80% of its one core: the
// load did not saturate it (too few connections, or it waited on a server),
// so its per-core figure is an extrapolation, not a ceiling.
func notBound(cpu, wall time.Duration) string {
	if wall <= 0 || cpu.Seconds()/wall.Seconds() >= 0.8 {
		return ""
	}
	return " (NOT CPU-bound: extrapolated; raise -c)"
}

func render(o options, figs []figure) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n## Per-part ceilings (bench/scaling, %s, %v a part, %s)\n\n", time.Now().UTC().Format("2006-01-02 15:04 UTC"), o.dur, machine())
	b.WriteString("| part | figure | per core | seen /s | how |\n|---|---|---:|---:|---|\n")
	for _, f := range figs {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", f.part, f.what, num(f.ceiling), num(f.seen), f.note)
	}
	b.WriteString("\nCommands:\n\n")
	for _, f := range figs {
		fmt.Fprintf(&b, "- %s, %s: `%s`\n", f.part, f.what, f.cmd)
	}
	return b.String()
}

func num(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 1:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.3g", v)
}

package testenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// fatalRecorder is a testing.TB whose Fatalf records the message and ends
// the calling goroutine, as the real one does.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (f *fatalRecorder) Helper() {}
func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	panic(f)
}

// fatalOf runs fn with a recorder and returns what it failed with ("" if
// it did not fail).
func fatalOf(t *testing.T, fn func(tb testing.TB)) (msg string) {
	rec := &fatalRecorder{TB: t}
	defer func() {
		if r := recover(); r != nil {
			if r != any(rec) {
				panic(r)
			}
			msg = rec.msg
		}
	}()
	fn(rec)
	return ""
}

func TestEventually(t *testing.T) {
	t.Run("returns once the condition holds", func(t *testing.T) {
		var n atomic.Int32
		if msg := fatalOf(t, func(tb testing.TB) {
			Eventually(tb, "the third check", time.Second, func() bool { return n.Add(1) == 3 })
		}); msg != "" {
			t.Fatalf("failed: %s", msg)
		}
		if n.Load() != 3 {
			t.Fatalf("%d checks, want 3", n.Load())
		}
	})
	t.Run("fails after the timeout naming what it waited for", func(t *testing.T) {
		start := time.Now()
		msg := fatalOf(t, func(tb testing.TB) {
			Eventually(tb, "the moon", 100*time.Millisecond, func() bool { return false })
		})
		if took := time.Since(start); took < 100*time.Millisecond || took > 2*time.Second {
			t.Errorf("gave up after %v, want about 100ms", took)
		}
		if !strings.Contains(msg, "the moon") || !strings.Contains(msg, "100ms") {
			t.Fatalf("failure %q does not name what and how long", msg)
		}
	})
	t.Run("the OK variant quotes the last error", func(t *testing.T) {
		var n int
		msg := fatalOf(t, func(tb testing.TB) {
			EventuallyOK(tb, "a quiet queue", 50*time.Millisecond, func() error { n++; return fmt.Errorf("%d pending", n) })
		})
		if n < 2 || !strings.Contains(msg, "a quiet queue") || !strings.Contains(msg, fmt.Sprintf("%d pending", n)) {
			t.Fatalf("after %d checks: failure %q, want the last error", n, msg)
		}
	})
}

func TestMetric(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "t_total", Help: "h"}, []string{"sku", "kind"})
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "t_gauge", Help: "h"})
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "t_seconds", Help: "h"})
	reg.MustRegister(c, g, h)
	c.WithLabelValues("1", "a").Add(2)
	c.WithLabelValues("1", "b").Add(3)
	c.WithLabelValues("2", "a").Add(5)
	g.Set(-4)
	h.Observe(1)
	h.Observe(2)
	for _, tc := range []struct {
		name    string
		metric  string
		labels  map[string]string
		want    float64
		present bool
	}{
		{"no labels sum every series", "t_total", nil, 10, true},
		{"one label sums the series that carry it", "t_total", map[string]string{"sku": "1"}, 5, true},
		{"all labels pick one series", "t_total", map[string]string{"sku": "2", "kind": "a"}, 5, true},
		{"a series never touched is absent", "t_total", map[string]string{"sku": "2", "kind": "b"}, 0, false},
		{"a label the metric lacks matches nothing", "t_total", map[string]string{"shard": "hot"}, 0, false},
		{"a gauge reads its value", "t_gauge", nil, -4, true},
		{"a histogram reads its sample count", "t_seconds", nil, 2, true},
		{"an unknown family is absent", "t_nope", nil, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, ok := MetricPresent(t, reg, tc.metric, tc.labels)
			if v != tc.want || ok != tc.present {
				t.Fatalf("MetricPresent = %v, %v; want %v, %v", v, ok, tc.want, tc.present)
			}
			if v := Metric(t, reg, tc.metric, tc.labels); v != tc.want {
				t.Fatalf("Metric = %v, want %v", v, tc.want)
			}
		})
	}
}

func TestProc(t *testing.T) {
	dir := t.TempDir()
	p := &Proc{Name: "stubborn", Bin: "/bin/sh", Log: filepath.Join(dir, "stubborn.log"),
		Args: []string{"-c", `trap 'echo got TERM' TERM; echo up $GREETING; while :; do sleep 0.05; done`},
		Env:  []string{"GREETING=hello"}}
	t.Cleanup(func() { p.Stop(syscall.SIGKILL, time.Second) })
	if p.PID() != 0 || p.Running() || p.Exited() != nil {
		t.Fatal("a process never started looks started")
	}
	for run := 1; run <= 2; run++ {
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		if err := p.Start(); err == nil || !strings.Contains(err.Error(), "running") {
			t.Fatalf("a second Start of a running process: %v", err)
		}
		if err := p.Await(5*time.Second, "its greeting", func() error {
			if !strings.Contains(p.SinceStart(), "up hello") {
				return errors.New("no greeting yet")
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if !p.Running() || p.PID() == 0 {
			t.Fatalf("run %d: running %v, pid %d", run, p.Running(), p.PID())
		}
		// It ignores SIGTERM: Stop kills it after the grace.
		start := time.Now()
		if killed := p.Stop(syscall.SIGTERM, 300*time.Millisecond); !killed {
			t.Fatalf("run %d: Stop did not report the SIGKILL it needed", run)
		}
		if took := time.Since(start); took < 300*time.Millisecond {
			t.Fatalf("run %d: stopped after %v, before the grace", run, took)
		}
		var exit *exec.ExitError
		if p.Running() || !errors.As(p.Err(), &exit) {
			t.Fatalf("run %d: running %v after Stop, exit %v", run, p.Running(), p.Err())
		}
	}
	if n := p.Count(StartMarker); n != 2 {
		t.Fatalf("the log holds %d start markers, want 2 (one per run):\n%s", n, p.Tail(20))
	}
	if n := p.Count("\ngot TERM\n"); n != 2 {
		t.Fatalf("the log holds %d SIGTERM notes, want 2:\n%s", n, p.Tail(20))
	}
	if since := p.SinceStart(); !strings.HasPrefix(since, StartMarker+"2 ") || strings.Count(since, "up hello") != 1 {
		t.Fatalf("SinceStart is not the last run:\n%s", since)
	}
}

func TestProcAwaitStopsWhenTheProcessExits(t *testing.T) {
	p := &Proc{Name: "quitter", Bin: "/bin/sh", Args: []string{"-c", "echo bye; exit 3"},
		Log: filepath.Join(t.TempDir(), "quitter.log")}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err := p.Await(10*time.Second, "a port that never opens", func() error { return errors.New("closed") })
	if err == nil || time.Since(start) > 5*time.Second {
		t.Fatalf("Await on an exited process: %v after %v", err, time.Since(start))
	}
	for _, want := range []string{"quitter exited", "exit status 3", "a port that never opens", "bye"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

// A process of its own group is killed with its children: the child a
// shell started in the background dies with it, as in a crash of the box.
func TestProcKillGroupKillsTheChildrenToo(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child.pid")
	p := &Proc{Name: "parent", Bin: "/bin/sh", Group: true, Log: filepath.Join(dir, "parent.log"),
		Args: []string{"-c", `sleep 60 & echo $! > ` + pidFile + `; wait`}}
	t.Cleanup(func() { p.Stop(syscall.SIGKILL, time.Second) })
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	var child int
	EventuallyOK(t, "the child's pid", 5*time.Second, func() error {
		b, err := os.ReadFile(pidFile)
		if err != nil {
			return err
		}
		child, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err
	})
	p.KillGroup()
	if p.Running() {
		t.Fatal("the parent still runs after KillGroup")
	}
	EventuallyOK(t, "the child gone", 5*time.Second, func() error {
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(child), "stat"))
		if err != nil {
			return nil // reaped
		}
		if f := strings.Fields(string(b)); len(f) > 2 && f[2] == "Z" {
			return nil // killed, not reaped yet by init
		}
		return fmt.Errorf("child %d still runs", child)
	})
}

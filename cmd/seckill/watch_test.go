package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"seckill/admin"
	"seckill/admin/client"
	"seckill/internal/testenv"
)

// TestWatchConsole runs `seckill dev` as a process, sells through its edge
// and draws `seckill admin watch` against its admin API: the numbers of a
// frame are the ones the admin API reports, the rates are the change of
// the counters between two samples over the time between them, the
// switches show, frames redraw in place on a terminal and follow one
// another otherwise, --count and SIGINT end it.
func TestWatchConsole(t *testing.T) {
	dir := t.TempDir()
	bin := buildSeckill(t, dir)
	pub, adm := freeAddr(t), freeAddr(t)
	p := startDev(t, bin, filepath.Join(dir, "data"), pub, adm, "SECKILL_ADMIN_TOKEN=watch-token")
	waitDevReady(t, p, pub)
	t.Run("dev says what it runs on, and that it is ready, without the admin token", func(t *testing.T) {
		testenv.EventuallyOK(t, "dev's ready line", 10*time.Second, func() error {
			if _, ok := logLine(p.SinceStart(), "ready"); !ok {
				return errors.New("no ready line\n" + p.SinceStart())
			}
			return nil
		})
		line, ok := logLine(p.SinceStart(), "starting")
		if !ok {
			t.Fatalf("no start line\n%s", p.SinceStart())
		}
		checkStartLine(t, line, map[string]any{"role": "dev", "listeners": map[string]string{"public": pub, "admin": adm},
			"store": "sqlite", "dsn": filepath.Join(dir, "data", "seckill.db")})
		redis, _ := line["redis"].(map[string]any)
		if b, _ := line["brokers"].([]any); len(redis) != 2 || len(b) != 1 {
			t.Errorf("dev's start line names %v Redis and %v brokers, want its two Redis children and its broker", line["redis"], line["brokers"])
		}
		b, _ := json.Marshal(line)
		for _, secret := range []string{"watch-token", "dev-token-secret-not-for-production"} {
			if strings.Contains(string(b), secret) {
				t.Errorf("the start line shows %q: %s", secret, b)
			}
		}
	})
	ctx := context.Background()
	c := client.New("http://"+adm, "watch-token", &http.Client{Timeout: 10 * time.Second})
	cli := func(args ...string) string {
		t.Helper()
		var out bytes.Buffer
		if err := runAdmin(append([]string{"--addr", "http://" + adm, "--token", "watch-token"}, args...), &out); err != nil {
			t.Fatalf("seckill admin %v: %v\n%s", args, err, out.String())
		}
		return out.String()
	}
	buy := func(user int, body string) int {
		t.Helper()
		a, err := callAs(user, "POST", "http://"+pub+"/api/v1/flash-sale/order", body)
		if err != nil {
			t.Fatal(err)
		}
		return a.Status
	}
	// settled waits until every ticket is an order and the consumer has
	// committed everything, so that two reads of the admin API agree.
	settled := func(ordered int64) {
		t.Helper()
		testenv.EventuallyOK(t, fmt.Sprintf("the sale to settle at %d ordered units", ordered), 20*time.Second, func() error {
			rep, err := c.Stock(ctx, 1)
			var lag admin.LagReport
			if err == nil {
				lag, err = c.Lag(ctx)
			}
			if err == nil && len(rep.SKUs) == 2 && rep.SKUs[0].Ordered+rep.SKUs[1].Ordered == ordered &&
				rep.SKUs[0].Occupied+rep.SKUs[1].Occupied == 0 && lag.Total == 0 {
				return nil
			}
			return fmt.Errorf("never settled: %+v, lag %+v, %v\n%s", rep, lag, err, p.SinceStart())
		})
	}
	for u := 1; u <= 4; u++ {
		if s := buy(u, `{"skuId":1001,"quantity":1}`); s != 200 {
			t.Fatalf("buyer %d: %d", u, s)
		}
	}
	settled(4)

	t.Run("a frame shows what the admin API reports, with rates from two samples", func(t *testing.T) {
		t0 := time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC)
		clock := []time.Time{t0, t0.Add(2 * time.Second)}
		w := &watch{c: c, activity: 1, every: time.Second, now: func() time.Time { now := clock[0]; clock = clock[1:]; return now }}
		first, err := w.sample(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// Between the samples: 3 tickets (2 of SKU 1001, 1 of the hot
		// SKU 1002) and 2 refusals (a repeat buyer, a bad quantity).
		for _, b := range []struct {
			user int
			body string
			want int
		}{
			{11, `{"skuId":1001,"quantity":1}`, 200},
			{12, `{"skuId":1001,"quantity":1}`, 200},
			{13, `{"skuId":1002,"quantity":1}`, 200},
			{1, `{"skuId":1001,"quantity":1}`, 409},
			{14, `{"skuId":1001,"quantity":0}`, 400},
		} {
			if s := buy(b.user, b.body); s != b.want {
				t.Fatalf("buyer %d %s: %d, want %d", b.user, b.body, s, b.want)
			}
		}
		settled(7)
		second, err := w.sample(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		frame(&first, second).table(&out, time.Second)
		got := out.String()
		t.Logf("frame:\n%s", got)

		// An independent read of the same numbers, through the CLI.
		var rep admin.StockReport
		if err := json.Unmarshal([]byte(cli("stock", "1", "--json")), &rep); err != nil {
			t.Fatal(err)
		}
		var lag admin.LagReport
		if err := json.Unmarshal([]byte(cli("--json", "lag")), &lag); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(got, "activity 1  ONLINE  03:04:07 ") {
			t.Errorf("header: want activity 1 ONLINE at the second sample's time\n%s", got)
		}
		// 3 tickets and 2 refusals in 2 seconds.
		if want := "accepted/s 1.5  rejected/s 1.0  lag " + strconv.FormatInt(lag.Total, 10) + "\n"; !strings.Contains(got, want) {
			t.Errorf("want the line %q\n%s", want, got)
		}
		sold := map[int64]string{1001: "1.0", 1002: "0.5"} // units per second: 2 and 1 in 2 s
		// Per SKU, the edge's purchases: 1001 accepted 2 and refused the
		// repeat buyer; the bad quantity names no SKU the edge resolved
		// (refused while parsing), so it counts in the total only.
		accepted := map[int64]string{1001: "1.0", 1002: "0.5"}
		rejected := map[int64]string{1001: "0.5", 1002: "0.0"}
		for _, s := range rep.SKUs {
			want := []string{strconv.FormatInt(s.SKUID, 10), yesNo(s.Hot), s.Shard, n(s.Initial), n(s.Remaining), n(s.Occupied),
				n(s.Ordered), n(s.Drift), sold[s.SKUID], accepted[s.SKUID], rejected[s.SKUID], yesNo(s.SoldOut), "off"}
			if row := rowOf(got, want[0]); strings.Join(row, " ") != strings.Join(want, " ") {
				t.Errorf("SKU %d: row %q, want %q (the admin API: %+v)", s.SKUID, row, want, s)
			}
		}
		if rep.SKUs[0].Ordered != 6 || rep.SKUs[0].Remaining != 994 || rep.SKUs[1].Ordered != 1 {
			t.Errorf("the admin API's own numbers: %+v", rep.SKUs)
		}

		// The first frame has no sample before it: no rates.
		out.Reset()
		frame(nil, first).table(&out, time.Second)
		if r := rowOf(out.String(), "1001"); !strings.Contains(out.String(), "accepted/s -  rejected/s -") || r[8] != "-" || r[9] != "-" || r[10] != "-" {
			t.Errorf("first frame shows rates:\n%s", out.String())
		}
	})

	t.Run("the switches show: activity OFFLINE, a SKU's sold-out mark", func(t *testing.T) {
		cli("soldout", "1002", "true")
		cli("state", "1", "OFFLINE")
		var out bytes.Buffer
		w := &watch{c: c, activity: 1, every: time.Second, count: 1, now: time.Now}
		if err := w.run(ctx, &out); err != nil {
			t.Fatal(err)
		}
		got := out.String()
		if !strings.HasPrefix(got, "activity 1  OFFLINE  ") {
			t.Errorf("state not shown:\n%s", got)
		}
		if r := rowOf(got, "1002"); len(r) != 13 || r[2] != "hot0" || r[11] != "yes" || r[12] != "on" {
			t.Errorf("1002's mark not shown: %q\n%s", r, got)
		}
		if r := rowOf(got, "1001"); len(r) != 13 || r[2] != "default" || r[11] != "no" || r[12] != "off" {
			t.Errorf("1001: %q\n%s", r, got)
		}
		cli("soldout", "1002", "false")
		cli("state", "1", "ONLINE")
	})

	t.Run("frames follow one another off a terminal and redraw in place on one", func(t *testing.T) {
		var out bytes.Buffer
		w := &watch{c: c, activity: 1, every: 100 * time.Millisecond, count: 3, now: time.Now}
		if err := w.run(ctx, &out); err != nil {
			t.Fatal(err)
		}
		frames := strings.Split(out.String(), "\n\n")
		if len(frames) != 3 || strings.Contains(out.String(), "\x1b") {
			t.Fatalf("want 3 plain frames separated by a blank line:\n%q", out.String())
		}
		for i, f := range frames {
			if !strings.HasPrefix(f, "activity 1  ONLINE") || (i == 0) != strings.Contains(f, "accepted/s -") {
				t.Errorf("frame %d:\n%s", i, f)
			}
		}

		out.Reset()
		w.ansi, w.count = true, 2
		if err := w.run(ctx, &out); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(out.String(), "\x1b[H\x1b[2J") || strings.Count(out.String(), "\x1b[H\x1b[2J") != 2 {
			t.Fatalf("want 2 frames each after clear + home:\n%q", out.String())
		}

		out.Reset()
		w.ansi, w.asJSON = false, true
		if err := w.run(ctx, &out); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if len(lines) != 2 {
			t.Fatalf("--json: want 2 lines:\n%s", out.String())
		}
		for i, l := range lines {
			var f watchFrame
			if err := json.Unmarshal([]byte(l), &f); err != nil {
				t.Fatal(err)
			}
			if f.ActivityID != 1 || len(f.SKUs) != 2 || f.SKUs[0].Ordered != 6 || (i == 0) != (f.AcceptedPerSec == nil) ||
				(i == 0) != (f.SKUs[0].AcceptedPerSec == nil) || (i == 0) != (f.SKUs[1].RejectedPerSec == nil) {
				t.Errorf("--json frame %d: %s", i, l)
			}
		}
	})

	t.Run("the command stops after --count frames, and on SIGINT", func(t *testing.T) {
		base := []string{"admin", "--addr", "http://" + adm, "--token", "watch-token", "watch", "1", "--interval", "100ms"}
		out, err := exec.Command(bin, append(base, "--count", "2")...).CombinedOutput()
		if err != nil || strings.Count(string(out), "activity 1  ONLINE") != 2 {
			t.Fatalf("--count 2: %v\n%s", err, out)
		}

		cmd := exec.Command(bin, base...)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer cmd.Process.Kill()
		lines := bufio.NewScanner(stdout)
		frames := 0
		for frames < 3 && lines.Scan() {
			if strings.HasPrefix(lines.Text(), "activity 1") {
				frames++
			}
		}
		if frames < 3 {
			t.Fatalf("saw %d frames before the output ended: %v", frames, lines.Err())
		}
		cmd.Process.Signal(syscall.SIGINT)
		go io.Copy(io.Discard, stdout)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("exit after SIGINT: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("still drawing 10 s after SIGINT")
		}
	})

	t.Run("a refused token or an unknown activity ends it with the API's answer", func(t *testing.T) {
		for _, tc := range []struct{ token, activity, want string }{
			{"wrong", "1", "401"},
			{"watch-token", "99", "404"},
		} {
			var out bytes.Buffer
			err := runAdmin([]string{"--addr", "http://" + adm, "--token", tc.token, "watch", tc.activity}, &out)
			var se *client.Error
			if !errors.As(err, &se) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("token %s, activity %s: %v, want %s", tc.token, tc.activity, err, tc.want)
			}
		}
	})
}

// TestWatchFramePerSKURates renders frames into a buffer from samples
// made by hand: each SKU's line shows its own accepted and rejected
// purchases per second, "-" on the first frame, for a SKU the edge has no
// counters of, and after a counter went back (a restarted process).
func TestWatchFramePerSKURates(t *testing.T) {
	t0 := time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC)
	stock := admin.StockReport{ActivityID: 7, State: "ONLINE", SKUs: []admin.SKUStock{{SKUID: 1001}, {SKUID: 1002}, {SKUID: 1003}}}
	first := watchSample{at: t0, stock: stock, perSKU: map[string]skuPurchases{
		"7/1001": {accepted: 10, rejected: 100}, "7/1002": {accepted: 5, rejected: 7},
		"8/1001": {accepted: 1000, rejected: 1000}, // another activity's SKU 1001
	}}
	second := watchSample{at: t0.Add(4 * time.Second), stock: stock, perSKU: map[string]skuPurchases{
		"7/1001": {accepted: 18, rejected: 140}, "7/1002": {accepted: 1, rejected: 7},
		"8/1001": {accepted: 5000, rejected: 5000},
	}}
	var out bytes.Buffer
	frame(&first, second).table(&out, time.Second)
	got := out.String()
	for _, tc := range []struct {
		sku, accepted, rejected string
	}{
		{"1001", "2.0", "10.0"}, // 8 and 40 in 4 s, activity 8's counts left out
		{"1002", "-", "-"},      // accepted went back: the edge restarted
		{"1003", "-", "-"},      // no counters of it
	} {
		r := rowOf(got, tc.sku)
		if len(r) != 12 || r[8] != tc.accepted || r[9] != tc.rejected {
			t.Errorf("SKU %s: row %q, want accepted/s %s rejected/s %s\n%s", tc.sku, r, tc.accepted, tc.rejected, got)
		}
	}
	if !strings.Contains(got, "ACCEPTED/S") || !strings.Contains(got, "REJECTED/S") {
		t.Errorf("no per-SKU rate columns:\n%s", got)
	}
	out.Reset()
	frame(nil, first).table(&out, time.Second)
	if r := rowOf(out.String(), "1001"); len(r) != 12 || r[8] != "-" || r[9] != "-" {
		t.Errorf("first frame, SKU 1001: %q\n%s", r, out.String())
	}
}

func n(v int64) string { return strconv.FormatInt(v, 10) }

// rowOf is the fields of the table row that starts with first.
func rowOf(table, first string) []string {
	for _, l := range strings.Split(table, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == first {
			return f
		}
	}
	return nil
}

// waitDevReady waits until p answers /readyz with 200.
func waitDevReady(t *testing.T, p *devProc, pub string) {
	t.Helper()
	testenv.EventuallyOK(t, "dev's readiness", 90*time.Second, func() error {
		select {
		case <-p.Exited():
			t.Fatalf("seckill dev exited: %v\n%s", p.Err(), p.SinceStart())
		default:
		}
		a, err := call("GET", "http://"+pub+"/readyz", "")
		if err == nil && a.Status == 200 {
			return nil
		}
		return fmt.Errorf("readyz: %+v %v\n%s", a, err, p.SinceStart())
	})
}

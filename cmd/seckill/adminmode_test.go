package main

import (
	"strings"
	"testing"
)

// TestAdminModePrintsAndSwitches: `seckill admin mode` lists, reads and
// switches a SKU's mode through the admin API and prints a table; bad
// arguments never reach the API and an API refusal is an error.
func TestAdminModePrintsAndSwitches(t *testing.T) {
	run, calls := stubAdmin(t, map[string]string{
		"GET /admin/v1/modes":        `[{"activityId":7,"skuId":70,"mode":"queue","rate":500},{"activityId":7,"skuId":71,"mode":"direct","rate":0}]`,
		"GET /admin/v1/skus/70/mode": `{"activityId":7,"skuId":70,"mode":"queue","rate":500}`,
		"PUT /admin/v1/skus/70/mode": `{"activityId":7,"skuId":70,"mode":"direct","rate":0}`,
	})
	printsLines(t, run, []string{"mode"}, []string{"ACTIVITY SKU MODE RATE/S", "7 70 queue 500", "7 71 direct shard"})
	printsLines(t, run, []string{"mode", "70"}, []string{"7 70 queue 500"})
	printsLines(t, run, []string{"mode", "70", "queue", "rate=500", "activity=7"}, []string{"7 70"})
	printsLines(t, run, []string{"mode", "70", "direct"}, []string{"7 70 direct shard"})
	var err error
	if _, err = run("mode", "71", "queue"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("a refused switch: %v", err)
	}
	for _, bad := range [][]string{{"mode", "x"}, {"mode", "70", "fifo"}, {"mode", "70", "rate=-1"}, {"mode", "70", "activity=a"}} {
		if _, err := run(bad...); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
	want := []string{
		"GET /admin/v1/modes Bearer tok",
		"GET /admin/v1/skus/70/mode Bearer tok",
		`PUT /admin/v1/skus/70/mode Bearer tok {"activityId":7,"mode":"queue","rate":500}`,
		`PUT /admin/v1/skus/70/mode Bearer tok {"mode":"direct"}`,
		`PUT /admin/v1/skus/71/mode Bearer tok {"mode":"queue"}`,
	}
	if got := calls(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("calls:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestAdminPrequeuePrintsTheDraw: `seckill admin prequeue` prints the
// draw's record, and the order served when asked for.
func TestAdminPrequeuePrintsTheDraw(t *testing.T) {
	seed := strings.Repeat("ab", 32)
	run, calls := stubAdmin(t, map[string]string{
		"GET /admin/v1/skus/70/prequeue": `{"activityId":7,"skuId":70,"prequeue":30,"drawn":false,"partition":0,"cutoff":0,"served":0,"done":false}`,
		"GET /admin/v1/skus/70/prequeue?activityId=7&order=true": `{"activityId":7,"skuId":70,"prequeue":30,"drawn":true,"seed":"` + seed +
			`","partition":2,"cutoff":41,"served":3,"order":[40,7,12],"done":true}`,
	})
	printsLines(t, run, []string{"prequeue", "70"}, []string{"ACTIVITY SKU PREQUEUE DRAWN SEED PARTITION CUTOFF SERVED DONE", "7 70 30m false - - - 0 false"})
	printsLines(t, run, []string{"prequeue", "70", "activity=7", "order"}, []string{"ACTIVITY SKU PREQUEUE DRAWN SEED PARTITION CUTOFF SERVED DONE",
		"7 70 30m true " + seed + " 2 41 3 true", "order: 40,7,12"})
	for _, bad := range [][]string{{"prequeue"}, {"prequeue", "x"}, {"prequeue", "70", "all"}, {"prequeue", "70", "activity=a"}} {
		if _, err := run(bad...); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
	want := []string{"GET /admin/v1/skus/70/prequeue Bearer tok", "GET /admin/v1/skus/70/prequeue?activityId=7&order=true Bearer tok"}
	if got := calls(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("calls:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAdminCommandsCallTheirRoute: each command makes its one call,
// spelled as before the CLI was built on admin/client (method, path, query
// and body byte for byte), and prints its table from the typed answer.
func TestAdminCommandsCallTheirRoute(t *testing.T) {
	act := `{"id":7,"start":"2030-01-01T00:00:00Z","end":"2030-01-02T00:00:00Z","state":"ONLINE","requireToken":false,` +
		`"skus":[{"id":7001,"stock":10,"price":"9.90","limitPerUser":1,"hot":false}]}`
	run, calls := stubAdmin(t, map[string]string{
		"GET /admin/v1/activities":                                     "[" + act + "]",
		"POST /admin/v1/activities":                                    act,
		"PUT /admin/v1/activities/7/state":                             act,
		"PUT /admin/v1/skus/7001/soldout":                              `{"activityId":7,"skuId":7001,"soldOut":true,"marked":true,"remaining":10}`,
		"POST /admin/v1/skus/7001/restock":                             `{"activityId":7,"skuId":7001,"added":5,"remaining":15,"initial":15}`,
		"GET /admin/v1/activities/7/stock":                             `{"activityId":7,"state":"ONLINE","skus":[{"skuId":7001,"shard":"default","initial":15,"remaining":15,"drift":0}]}`,
		"GET /admin/v1/requests/7-7001-1":                              `{"requestNo":"7-7001-1","answer":"no order"}`,
		"GET /admin/v1/users/77/requests?activity=7&cursor=C1&limit=5": `{"userId":77,"activityId":7,"requests":[],"next":"C2"}`,
		"POST /admin/v1/reconcile?repair=true":                         `{"at":"2030-01-01T00:00:00Z","repair":true,"drifts":0,"repairs":0,"skus":[]}`,
		"GET /admin/v1/lag":                                            `{"total":3,"partitions":{"0":1,"1":2}}`,
		"GET /admin/v1/blocklist":                                      `{"ips":["10.0.0.0/8"],"users":[],"configured":{"ips":[],"users":[9]}}`,
		"PUT /admin/v1/blocklist/ips/10.0.0.0/8":                       `{"ip":"10.0.0.0/8","blocked":true,"changed":true}`,
		"DELETE /admin/v1/blocklist/users/5":                           `{"user":5,"blocked":false,"changed":true}`,
	})
	file := filepath.Join(t.TempDir(), "act.json")
	if err := os.WriteFile(file, []byte(act), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want []string // lines of the table, fields collapsed to one space
	}{
		{[]string{"activities"}, []string{"ID STATE START END TOKEN SKUS", "7 ONLINE 2030-01-01T00:00:00Z 2030-01-02T00:00:00Z false 7001×10@9.90"}},
		{[]string{"create", file}, []string{"7 ONLINE 2030-01-01T00:00:00Z"}},
		{[]string{"state", "7", "offline"}, []string{"7 ONLINE"}},
		{[]string{"soldout", "7001", "true", "7"}, []string{"ACTIVITY SKU MARK SOLD OUT REMAINING", "7 7001 on yes 10"}},
		{[]string{"restock", "7001", "5", "7"}, []string{"ACTIVITY SKU ADDED REMAINING INITIAL", "7 7001 5 15 15"}},
		{[]string{"stock", "7"}, []string{"activity 7 ONLINE", "7001 false default 15 15 0 0 0 false 0"}},
		{[]string{"request", "7-7001-1"}, []string{"ticket 7-7001-1", "answer no order", "result none in Redis"}},
		{[]string{"why", "77", "7", "--cursor", "C1", "--limit", "5"}, []string{"user 77, activity 7: 0 entries", "more: seckill admin why 77 7 --cursor C2"}},
		{[]string{"reconcile", "--repair"}, []string{"0 SKUs, 0 drifts, 0 repairs"}},
		{[]string{"lag"}, []string{"PARTITION LAG", "0 1", "1 2", "total 3"}},
		{[]string{"blocklist"}, []string{"KIND ENTRY SOURCE", "ip 10.0.0.0/8 admin", "user 9 config"}},
		{[]string{"block", "ip", "10.0.0.0/8"}, []string{"KIND ENTRY STATE CHANGED", "ip 10.0.0.0/8 blocked yes"}},
		{[]string{"unblock", "user", "5"}, []string{"user 5 not blocked yes"}},
	} {
		printsLines(t, run, tc.args, tc.want)
	}
	want := []string{
		"GET /admin/v1/activities Bearer tok",
		"POST /admin/v1/activities Bearer tok " + act,
		`PUT /admin/v1/activities/7/state Bearer tok {"state":"OFFLINE"}`,
		`PUT /admin/v1/skus/7001/soldout Bearer tok {"activityId":7,"soldOut":true}`,
		`POST /admin/v1/skus/7001/restock Bearer tok {"activityId":7,"units":5}`,
		"GET /admin/v1/activities/7/stock Bearer tok",
		"GET /admin/v1/requests/7-7001-1 Bearer tok",
		"GET /admin/v1/users/77/requests?activity=7&cursor=C1&limit=5 Bearer tok",
		"POST /admin/v1/reconcile?repair=true Bearer tok",
		"GET /admin/v1/lag Bearer tok",
		"GET /admin/v1/blocklist Bearer tok",
		"PUT /admin/v1/blocklist/ips/10.0.0.0/8 Bearer tok",
		"DELETE /admin/v1/blocklist/users/5 Bearer tok",
	}
	if got := calls(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("calls:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestAdminJSONPrintsTheAPIsAnswerAsSent: --json prints what the API
// answered, a field this CLI does not know included; the table of the same
// answer still prints.
func TestAdminJSONPrintsTheAPIsAnswerAsSent(t *testing.T) {
	run, _ := stubAdmin(t, map[string]string{
		"GET /admin/v1/lag": `{"total":3,"partitions":{"0":3},"fromANewerServer":true}`,
	})
	out, err := run("--json", "lag")
	if err != nil || out != "{\n  \"total\": 3,\n  \"partitions\": {\n    \"0\": 3\n  },\n  \"fromANewerServer\": true\n}\n" {
		t.Fatalf("--json lag: %v\n%q", err, out)
	}
	if out, err := run("lag"); err != nil || !strings.Contains(strings.Join(strings.Fields(out), " "), "total 3") {
		t.Fatalf("lag: %v\n%s", err, out)
	}
	out, err = run("--json", "stock", "99")
	if err == nil || !strings.Contains(err.Error(), "404 NOT_FOUND") || !strings.Contains(out, `"code":"NOT_FOUND"`) {
		t.Fatalf("--json of a refusal: %v\n%s", err, out)
	}
}

// TestAdminChecksArgumentsBeforeTheCall: ids that are no positive number,
// an activity file with a field the API does not know, and missing
// arguments are refused by the CLI; none reaches the API.
func TestAdminChecksArgumentsBeforeTheCall(t *testing.T) {
	run, calls := stubAdmin(t, nil)
	dir := t.TempDir()
	typo := filepath.Join(dir, "typo.json")
	if err := os.WriteFile(typo, []byte(`{"id":7,"skus":[{"id":1,"stok":10}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][]string{
		{"stock"}, {"stock", "x"}, {"stock", "0"}, {"state", "x", "ONLINE"}, {"state", "7"},
		{"soldout", "x", "true"}, {"soldout", "7001", "maybe"}, {"soldout", "7001", "true", "x"},
		{"restock", "x", "5"}, {"restock", "7001", "five"}, {"restock", "7001", "5", "-1"},
		{"why", "0"}, {"why", "77", "x"}, {"create", typo}, {"create", filepath.Join(dir, "missing.json")},
		{"risk"}, {"risk", "7"}, {"block", "user", "x"}, {"block", "ip"}, {"request"}, {"watch", "x"},
	} {
		if _, err := run(bad...); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
	if got := calls(); len(got) != 0 {
		t.Errorf("calls %v, want none", got)
	}
}

package admin_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	"seckill/admin"
	"seckill/admin/admintest"
	"seckill/reconcile"
	"seckill/sale"
)

var update = flag.Bool("update", false, "rewrite testdata/api.golden from the answers")

// apiCall is one call of the admin API and the type its answer is.
type apiCall struct {
	method, pattern, path, body string
	into                        func() any
}

func typed[T any]() func() any { return func() any { return new(T) } }

// apiCalls calls every route of the admin API once (in an order that
// gives each something to answer), against admintest's sale.
var apiCalls = []apiCall{
	{"POST", "/admin/v1/activities", "/admin/v1/activities", "", typed[sale.Activity]()},
	{"GET", "/admin/v1/activities", "/admin/v1/activities", "", typed[[]sale.Activity]()},
	{"PUT", "/admin/v1/activities/{id}/state", "/admin/v1/activities/1/state", `{"state":"ONLINE"}`, typed[sale.Activity]()},
	{"PUT", "/admin/v1/activities/{id}/risk", "/admin/v1/activities/1/risk", `{"onError":"deny"}`, typed[admin.RiskAnswer]()},
	{"GET", "/admin/v1/risk/unchecked", "/admin/v1/risk/unchecked?state=pending&limit=5", "", typed[admin.UncheckedView]()},
	{"PUT", "/admin/v1/activities/{id}/degrade", "/admin/v1/activities/1/degrade", `{"pollAfterMs":1500}`, typed[admin.DegradeView]()},
	{"GET", "/admin/v1/degrade", "/admin/v1/degrade", "", typed[[]admin.DegradeView]()},
	{"PUT", "/admin/v1/skus/{sku}/soldout", "/admin/v1/skus/11/soldout", `{"soldOut":true}`, typed[admin.SoldOutAnswer]()},
	{"POST", "/admin/v1/skus/{sku}/restock", "/admin/v1/skus/10/restock", `{"units":3,"activityId":1}`, typed[admin.RestockAnswer]()},
	{"GET", "/admin/v1/activities/{id}/stock", "/admin/v1/activities/1/stock", "", typed[admin.StockReport]()},
	{"PUT", "/admin/v1/skus/{sku}/mode", "/admin/v1/skus/10/mode", `{"mode":"queue","rate":500}`, typed[admin.ModeView]()},
	{"GET", "/admin/v1/skus/{sku}/mode", "/admin/v1/skus/10/mode?activityId=1", "", typed[admin.ModeView]()},
	{"GET", "/admin/v1/modes", "/admin/v1/modes", "", typed[[]admin.ModeView]()},
	{"GET", "/admin/v1/skus/{sku}/prequeue", "/admin/v1/skus/10/prequeue?activityId=1&order=true", "", typed[admin.PrequeueView]()},
	{"GET", "/admin/v1/requests/{requestNo}", "/admin/v1/requests/" + admintest.Ticket, "", typed[admin.Story]()},
	{"GET", "/admin/v1/users/{id}/requests", "/admin/v1/users/42/requests?limit=5", "", typed[admin.UserRequests]()},
	{"POST", "/admin/v1/reconcile", "/admin/v1/reconcile", "", typed[reconcile.Report]()},
	{"GET", "/admin/v1/lag", "/admin/v1/lag", "", typed[admin.LagReport]()},
	{"GET", "/admin/v1/routes", "/admin/v1/routes", "", typed[[]admin.RouteView]()},
	{"PUT", "/admin/v1/routes/{name}", "/admin/v1/routes/orders", `{"open":false}`, typed[[]admin.RouteView]()},
	{"PUT", "/admin/v1/blocklist/ips/{ip:*}", "/admin/v1/blocklist/ips/10.0.0.0/8", "", typed[admin.BlockAnswer]()},
	{"PUT", "/admin/v1/blocklist/users/{id}", "/admin/v1/blocklist/users/5", "", typed[admin.BlockAnswer]()},
	{"GET", "/admin/v1/blocklist", "/admin/v1/blocklist", "", typed[admin.BlocklistView]()},
	{"DELETE", "/admin/v1/blocklist/ips/{ip:*}", "/admin/v1/blocklist/ips/10.0.0.0/8", "", typed[admin.BlockAnswer]()},
	{"DELETE", "/admin/v1/blocklist/users/{id}", "/admin/v1/blocklist/users/5", "", typed[admin.BlockAnswer]()},
}

// errorCalls are refusals, each answered as admin.Error.
var errorCalls = []struct {
	name, method, path, body, token string
	status                          int
}{
	{"no token", "GET", "/admin/v1/activities", "", "", 401},
	{"an unknown activity", "GET", "/admin/v1/activities/99/stock", "", admintest.Token, 404},
	{"an id that is no number", "PUT", "/admin/v1/activities/x/state", `{"state":"ONLINE"}`, admintest.Token, 400},
	{"an unknown field in the body", "PUT", "/admin/v1/activities/1/state", `{"state":"ONLINE","x":1}`, admintest.Token, 400},
	{"an unknown ticket", "GET", "/admin/v1/requests/nope", "", admintest.Token, 404},
}

func do(t *testing.T, base, method, path, body, token string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// strict decodes b into v refusing unknown fields and trailing data.
func strict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("data after the answer (%v)", err)
	}
	return nil
}

// fields lists the JSON field paths of v ("skus[].skuId"), sorted.
func fields(v any) []string {
	set := map[string]bool{}
	var walk func(v any, at string)
	walk = func(v any, at string) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if at == ".partitions" {
					k = "{n}" // keyed by partition number
				}
				set[at+"."+k] = true
				walk(e, at+"."+k)
			}
		case []any:
			for _, e := range x {
				walk(e, at+"[]")
			}
		}
	}
	walk(v, "")
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestEveryAnswerDecodesStrictlyIntoItsType: every route of the admin API
// answers JSON that decodes into its named type with unknown fields
// refused; every refusal into admin.Error. The field names of each answer
// are the contract (docs/admin.md, the CLI, scripts): they stand in
// testdata/api.golden, so a renamed or dropped field fails here (go test
// -run TestEveryAnswer -update rewrites it after a deliberate change). A
// route registered without an entry here fails too.
func TestEveryAnswerDecodesStrictlyIntoItsType(t *testing.T) {
	r := admintest.Start(t)
	apiCalls[0].body = string(admintest.ActivityJSON(t))
	var golden strings.Builder
	covered := map[string]bool{}
	for _, c := range apiCalls {
		covered[c.method+" "+c.pattern] = true
		status, b := do(t, r.URL, c.method, c.path, c.body, admintest.Token)
		if status != 200 {
			t.Errorf("%s %s: %d %s", c.method, c.path, status, b)
			continue
		}
		if err := strict(b, c.into()); err != nil {
			t.Errorf("%s %s: %v\n%s", c.method, c.path, err, b)
		}
		var raw any
		if err := json.Unmarshal(b, &raw); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&golden, "%s %s\n", c.method, c.pattern)
		for _, f := range fields(raw) {
			fmt.Fprintf(&golden, "\t%s\n", f)
		}
	}
	for _, c := range errorCalls {
		status, b := do(t, r.URL, c.method, c.path, c.body, c.token)
		var e admin.Error
		if err := strict(b, &e); status != c.status || err != nil || e.Code == "" || e.Message == "" {
			t.Errorf("%s: %d %s (%v), want %d and an admin.Error", c.name, status, b, err, c.status)
		}
	}
	for method, paths := range r.Server.Router().List() {
		for _, p := range paths {
			if !covered[method+" "+p] {
				t.Errorf("route %s %s has no typed answer in apiCalls", method, p)
			}
		}
	}
	const path = "testdata/api.golden"
	if *update {
		if err := os.WriteFile(path, []byte(golden.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -run TestEveryAnswer -update writes it)", err)
	}
	if got := golden.String(); got != string(want) {
		t.Errorf("the answers' fields differ from %s; they are now:\n%s", path, got)
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for _, l := range wl {
			if !slices.Contains(gl, l) {
				t.Errorf("field gone from the answers: %q", l)
			}
		}
		for _, l := range gl {
			if !slices.Contains(wl, l) {
				t.Errorf("field new in the answers (add it to %s with -update if deliberate): %q", path, l)
			}
		}
	}
}

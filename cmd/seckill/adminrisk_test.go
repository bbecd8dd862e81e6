package main

import (
	"strings"
	"testing"
)

// TestAdminRiskCallsTheSwitch: `seckill admin risk ACTIVITY allow|deny`
// PUTs the policy to the admin API with the token and tells what it means;
// bad arguments never reach the API, the API's refusal is an error.
func TestAdminRiskCallsTheSwitch(t *testing.T) {
	answer := `{"activityId":1,"onError":"deny"}`
	admin, calls := stubAdmin(t, map[string]string{"PUT /admin/v1/activities/1/risk": answer})

	out, err := admin("risk", "1", "DENY")
	if err != nil || !strings.Contains(out, "activity 1: when the risk service times out or fails, purchases are answered 503 BUSY") {
		t.Fatalf("risk 1 deny: %v\n%s", err, out)
	}
	if out, err = admin("--json", "risk", "1", "allow"); err != nil || !strings.Contains(out, `"onError"`) {
		t.Fatalf("--json risk 1 allow: %v\n%s", err, out)
	}
	if _, err = admin("risk", "99", "deny"); err == nil || !strings.Contains(err.Error(), "404 NOT_FOUND") {
		t.Fatalf("unknown activity: %v", err)
	}
	for _, bad := range [][]string{{"risk", "1"}, {"risk", "x", "deny"}, {"risk", "1", "maybe"}} {
		if _, err := admin(bad...); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
	got := calls()
	want := []string{
		`PUT /admin/v1/activities/1/risk Bearer tok {"onError":"deny"}`,
		`PUT /admin/v1/activities/1/risk Bearer tok {"onError":"allow"}`,
		`PUT /admin/v1/activities/99/risk Bearer tok {"onError":"deny"}`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("calls:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

const adminUsage = `usage: seckill admin [--addr URL] [--token TOKEN] [--json] <command> [args]

The address and token also come from SECKILL_ADMIN_ADDR (default
http://127.0.0.1:8081) and SECKILL_ADMIN_TOKEN.

commands:
  activities                          list activities
  create FILE.json                    create or replace + preheat an activity ("-" reads stdin)
  state ACTIVITY ONLINE|OFFLINE       switch an activity online or offline
  risk ACTIVITY allow|deny            on a risk-service timeout or error: pass purchases, or answer 503
  soldout SKU true|false [ACTIVITY]   set or clear the on-call sold-out mark
  restock SKU UNITS [ACTIVITY]        add units to a live SKU
  stock ACTIVITY                      initial / remaining / occupied / ordered / drift per SKU
  request REQUEST_NO                  the story of one ticket
  reconcile [--repair]                run reconciliation now
  lag                                 consumer lag per partition
  blocklist                           IP and user blocklists (admin API and configuration)
  block ip ADDRESS|CIDR               refuse an address or network at every edge (403)
  block user USER_ID                  refuse a user at every edge (403)
  unblock ip ADDRESS|CIDR             lift an admin API block of an address or network
  unblock user USER_ID                lift an admin API block of a user
`

// runAdmin is `seckill admin`: one call of the admin API per command.
func runAdmin(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("admin", flag.ContinueOnError)
	fs.SetOutput(out)
	addr := fs.String("addr", envOr("SECKILL_ADMIN_ADDR", "http://127.0.0.1:8081"), "admin API base URL")
	tok := fs.String("token", os.Getenv("SECKILL_ADMIN_TOKEN"), "admin bearer token")
	asJSON := fs.Bool("json", false, "print the raw JSON answer")
	fs.Usage = func() { fmt.Fprint(out, adminUsage) }
	if err := fs.Parse(args); err != nil {
		return err
	}
	a := fs.Args()
	if len(a) == 0 || a[0] == "help" {
		fmt.Fprint(out, adminUsage)
		return nil
	}
	c := adminClient{base: strings.TrimRight(*addr, "/"), token: *tok, http: &http.Client{Timeout: 30 * time.Second}}
	var (
		method, path string
		body         any
		raw          []byte
		render       func([]byte, io.Writer) error
	)
	need := func(n int) error {
		if len(a)-1 < n {
			return fmt.Errorf("%s needs %d argument(s); see seckill admin help", a[0], n)
		}
		return nil
	}
	switch a[0] {
	case "activities":
		method, path, render = "GET", "/admin/v1/activities", renderActivities
	case "create":
		if err := need(1); err != nil {
			return err
		}
		var err error
		if a[1] == "-" {
			raw, err = io.ReadAll(os.Stdin)
		} else {
			raw, err = os.ReadFile(a[1])
		}
		if err != nil {
			return err
		}
		method, path = "POST", "/admin/v1/activities"
	case "state":
		if err := need(2); err != nil {
			return err
		}
		method, path, body = "PUT", "/admin/v1/activities/"+a[1]+"/state", map[string]string{"state": strings.ToUpper(a[2])}
	case "risk":
		return adminRisk(c, a[1:], *asJSON, out)
	case "soldout":
		if err := need(2); err != nil {
			return err
		}
		v, err := strconv.ParseBool(a[2])
		if err != nil {
			return fmt.Errorf("soldout: %q is not true or false", a[2])
		}
		b := map[string]any{"soldOut": v}
		if len(a) > 3 {
			b["activityId"], _ = strconv.ParseInt(a[3], 10, 64)
		}
		method, path, body = "PUT", "/admin/v1/skus/"+a[1]+"/soldout", b
	case "restock":
		if err := need(2); err != nil {
			return err
		}
		n, err := strconv.ParseInt(a[2], 10, 64)
		if err != nil {
			return fmt.Errorf("restock: units %q is not a number", a[2])
		}
		b := map[string]any{"units": n}
		if len(a) > 3 {
			b["activityId"], _ = strconv.ParseInt(a[3], 10, 64)
		}
		method, path, body = "POST", "/admin/v1/skus/"+a[1]+"/restock", b
	case "stock":
		if err := need(1); err != nil {
			return err
		}
		method, path, render = "GET", "/admin/v1/activities/"+a[1]+"/stock", renderStock
	case "request":
		if err := need(1); err != nil {
			return err
		}
		method, path = "GET", "/admin/v1/requests/"+a[1]
	case "reconcile":
		method, path = "POST", "/admin/v1/reconcile"
		if len(a) > 1 && a[1] == "--repair" {
			path += "?repair=true"
		}
	case "lag":
		method, path = "GET", "/admin/v1/lag"
	case "blocklist":
		method, path, render = "GET", "/admin/v1/blocklist", renderBlocklist
	case "block", "unblock":
		if err := need(2); err != nil {
			return err
		}
		method = "PUT"
		if a[0] == "unblock" {
			method = "DELETE"
		}
		switch a[1] {
		case "ip":
			if strings.ContainsAny(a[2], " ?#") {
				return fmt.Errorf("%s ip: %q is not an address or CIDR prefix", a[0], a[2])
			}
			path = "/admin/v1/blocklist/ips/" + a[2]
		case "user":
			if _, err := strconv.ParseInt(a[2], 10, 64); err != nil {
				return fmt.Errorf("%s user: %q is not a user id", a[0], a[2])
			}
			path = "/admin/v1/blocklist/users/" + a[2]
		default:
			return fmt.Errorf("%s takes ip or user, not %q; see seckill admin help", a[0], a[1])
		}
		render = renderBlock
	default:
		return fmt.Errorf("unknown admin command %q; see seckill admin help", a[0])
	}
	if body != nil {
		raw, _ = json.Marshal(body)
	}
	status, resp, err := c.do(method, path, raw)
	if err != nil {
		return err
	}
	if status >= 300 {
		var e struct{ Code, Message string }
		_ = json.Unmarshal(resp, &e)
		if *asJSON {
			out.Write(resp)
			fmt.Fprintln(out)
		}
		return fmt.Errorf("%s %s: %d %s: %s", method, path, status, e.Code, e.Message)
	}
	if *asJSON || render == nil {
		var pretty bytes.Buffer
		if json.Indent(&pretty, resp, "", "  ") == nil {
			resp = pretty.Bytes()
		}
		out.Write(resp)
		fmt.Fprintln(out)
		return nil
	}
	return render(resp, out)
}

func envOr(k, d string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return d
}

type adminClient struct {
	base, token string
	http        *http.Client
}

func (c adminClient) do(method, path string, body []byte) (int, []byte, error) {
	req, err := http.NewRequest(method, c.base+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("admin API at %s: %w", c.base, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

func renderStock(b []byte, out io.Writer) error {
	var rep struct {
		ActivityID int64  `json:"activityId"`
		State      string `json:"state"`
		SKUs       []struct {
			SKUID                                        int64 `json:"skuId"`
			Hot, SoldOut, MarkedSoldOut                  bool
			Initial, Remaining, Occupied, Ordered, Drift int64
			Orders                                       int64
		} `json:"skus"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		return err
	}
	fmt.Fprintf(out, "activity %d  %s\n", rep.ActivityID, rep.State)
	w := tabwriter.NewWriter(out, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "SKU\tHOT\tINITIAL\tREMAINING\tOCCUPIED\tORDERED\tORDERS\tSOLD OUT\tDRIFT\t")
	for _, s := range rep.SKUs {
		so := fmt.Sprint(s.SoldOut)
		if s.MarkedSoldOut {
			so += " (marked)"
		}
		fmt.Fprintf(w, "%d\t%v\t%d\t%d\t%d\t%d\t%d\t%s\t%d\t\n", s.SKUID, s.Hot, s.Initial, s.Remaining, s.Occupied, s.Ordered, s.Orders, so, s.Drift)
	}
	return w.Flush()
}

func renderActivities(b []byte, out io.Writer) error {
	var acts []struct {
		ID           int64     `json:"id"`
		Start, End   time.Time `json:"-"`
		StartS       string    `json:"start"`
		EndS         string    `json:"end"`
		State        string    `json:"state"`
		RequireToken bool      `json:"requireToken"`
		SKUs         []struct {
			ID    int64  `json:"id"`
			Stock int64  `json:"stock"`
			Price string `json:"price"`
			Hot   bool   `json:"hot"`
		} `json:"skus"`
	}
	if err := json.Unmarshal(b, &acts); err != nil {
		return err
	}
	if len(acts) == 0 {
		return errors.New("no activities")
	}
	sort.Slice(acts, func(i, j int) bool { return acts[i].ID < acts[j].ID })
	w := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tSTATE\tSTART\tEND\tTOKEN\tSKUS")
	for _, a := range acts {
		var skus []string
		for _, s := range a.SKUs {
			h := ""
			if s.Hot {
				h = " hot"
			}
			skus = append(skus, fmt.Sprintf("%d×%d@%s%s", s.ID, s.Stock, s.Price, h))
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%v\t%s\n", a.ID, a.State, a.StartS, a.EndS, a.RequireToken, strings.Join(skus, " "))
	}
	return w.Flush()
}

func renderBlocklist(b []byte, out io.Writer) error {
	var v struct {
		IPs        []string `json:"ips"`
		Users      []int64  `json:"users"`
		Configured struct {
			IPs   []string `json:"ips"`
			Users []int64  `json:"users"`
		} `json:"configured"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	w := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(w, "KIND\tENTRY\tSOURCE")
	for _, ip := range v.IPs {
		fmt.Fprintf(w, "ip\t%s\tadmin\n", ip)
	}
	for _, ip := range v.Configured.IPs {
		fmt.Fprintf(w, "ip\t%s\tconfig\n", ip)
	}
	for _, u := range v.Users {
		fmt.Fprintf(w, "user\t%d\tadmin\n", u)
	}
	for _, u := range v.Configured.Users {
		fmt.Fprintf(w, "user\t%d\tconfig\n", u)
	}
	return w.Flush()
}

func renderBlock(b []byte, out io.Writer) error {
	var v struct {
		IP      string `json:"ip"`
		User    int64  `json:"user"`
		Blocked bool   `json:"blocked"`
		Changed bool   `json:"changed"`
		Note    string `json:"note"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	what := "ip " + v.IP
	if v.IP == "" {
		what = "user " + strconv.FormatInt(v.User, 10)
	}
	state := "blocked"
	if !v.Blocked {
		state = "not blocked"
	}
	change := " (no change)"
	if v.Changed {
		change = ""
	}
	fmt.Fprintf(out, "%s: %s%s\n", what, state, change)
	if v.Note != "" {
		fmt.Fprintf(out, "note: %s\n", v.Note)
	}
	return nil
}

// adminRisk is `seckill admin risk ACTIVITY allow|deny`: the activity's
// risk policy, what every edge does with a purchase when the risk service
// (edge.risk.url) times out or fails.
func adminRisk(c adminClient, args []string, asJSON bool, out io.Writer) error {
	if len(args) != 2 {
		return fmt.Errorf("risk needs ACTIVITY allow|deny; see seckill admin help")
	}
	if _, err := strconv.ParseInt(args[0], 10, 64); err != nil {
		return fmt.Errorf("risk: %q is not an activity id", args[0])
	}
	policy := strings.ToLower(args[1])
	if policy != "allow" && policy != "deny" {
		return fmt.Errorf("risk: policy %q must be allow or deny", args[1])
	}
	path := "/admin/v1/activities/" + args[0] + "/risk"
	status, resp, err := c.do("PUT", path, []byte(`{"onError":"`+policy+`"}`))
	if err != nil {
		return err
	}
	if asJSON {
		out.Write(resp)
		fmt.Fprintln(out)
	}
	if status >= 300 {
		var e struct{ Code, Message string }
		_ = json.Unmarshal(resp, &e)
		return fmt.Errorf("PUT %s: %d %s: %s", path, status, e.Code, e.Message)
	}
	if !asJSON {
		what := "purchases pass without a verdict (degrade open, counted in seckill_edge_risk_degraded_total)"
		if policy == "deny" {
			what = "purchases are answered 503 BUSY"
		}
		fmt.Fprintf(out, "activity %s: when the risk service times out or fails, %s\n", args[0], what)
	}
	return nil
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const adminUsage = `usage: seckill admin [--addr URL] [--token-file FILE] [--json] <command> [args]

The address comes from --addr or SECKILL_ADMIN_ADDR (default
http://127.0.0.1:8081), the token from SECKILL_ADMIN_TOKEN or the first
line of --token-file ("-" reads stdin). --token TOKEN still works but
shows the token to anyone who lists processes (ps): it warns. Every command prints a
table; --json prints the admin API's answer instead. Flags may come
before or after the command.

commands:
  activities                          list activities
  create FILE.json                    create or replace + preheat an activity ("-" reads stdin)
  state ACTIVITY ONLINE|OFFLINE       switch an activity online or offline
  risk ACTIVITY allow|deny            on a risk-service timeout or error: pass purchases by the local
                                      rules (recorded, re-checked later), or answer 503
  risk unchecked [--state S] [--limit N]
                                      purchases that passed without a risk verdict and their re-check
                                      (S: pending, allow or deny)
  degrade                             every activity's degrade switches
  degrade ACTIVITY SWITCH=VALUE...    set degrade switches: reservedOnly=on|off (only reserved users
                                      buy, others 403), pollAfterMs=0..60000 (how long QUEUING buyers
                                      wait between polls; 0: the edge's default), paused=on|off
                                      (intake paused: purchases 503 with Retry-After, results readable)
  routes                              the non-core buyer routes (orders, pay, events), open or closed
  routes NAME open|closed             open or close one of them at every edge (closed: 503 + Retry-After)
  mode [SKU [direct|queue] [rate=N] [activity=A]]
                                      how the edges take a SKU's purchases: direct (occupy on the
                                      request) or queue (202 WAITING, drained in line order at N/s;
                                      rate=0: as fast as the shard allows); no SKU: every SKU
  soldout SKU true|false [ACTIVITY]   set or clear the on-call sold-out mark
  restock SKU UNITS [ACTIVITY]        add units to a live SKU
  stock ACTIVITY                      initial / remaining / occupied / ordered / drift per SKU
  request REQUEST_NO                  the story of one ticket
  why USER [ACTIVITY] [--cursor C] [--limit N]
                                      every attempt and ticket of a buyer, newest first,
                                      with its outcome and reason (support's lookup)
  reconcile [--repair]                run reconciliation now
  lag                                 consumer lag per partition
  blocklist                           IP and user blocklists (admin API and configuration)
  block ip ADDRESS|CIDR               refuse an address or network at every edge (403)
  block user USER_ID                  refuse a user at every edge (403)
  unblock ip ADDRESS|CIDR             lift an admin API block of an address or network
  unblock user USER_ID                lift an admin API block of a user
  watch ACTIVITY [--interval 1s] [--count N]
                                      the live console: redraws per SKU stock, drift, sales
                                      per second, accepted and rejected per second, consumer
                                      lag and the switches; Ctrl-C stops it (--json: one
                                      JSON object per frame)
`

// adminWarnings is where the admin CLI warns (not its output, which
// scripts read).
var adminWarnings io.Writer = os.Stderr

// cliAdminToken is the admin token of the CLI: --token-file's first line,
// else --token (with a warning: the command line is world-readable in
// ps and /proc), else SECKILL_ADMIN_TOKEN. Both flags at once is an error.
func cliAdminToken(flagToken, file string) (string, error) {
	switch {
	case file != "" && flagToken != "":
		return "", errors.New("--token and --token-file: give one")
	case file != "":
		var b []byte
		var err error
		if file == "-" {
			b, err = io.ReadAll(io.LimitReader(os.Stdin, 4096))
		} else {
			b, err = os.ReadFile(file)
		}
		if err != nil {
			return "", fmt.Errorf("--token-file: %w", err)
		}
		tok, _, _ := strings.Cut(string(b), "\n")
		if tok = strings.TrimSpace(tok); tok == "" {
			return "", fmt.Errorf("--token-file %s: the first line is empty", file)
		}
		return tok, nil
	case flagToken != "":
		fmt.Fprintln(adminWarnings, "seckill admin: warning: --token is visible to every user of this machine (ps); use SECKILL_ADMIN_TOKEN or --token-file")
		return flagToken, nil
	}
	return os.Getenv("SECKILL_ADMIN_TOKEN"), nil
}

// runAdmin is `seckill admin`: one call of the admin API per command, or
// the live console (watch).
func runAdmin(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("admin", flag.ContinueOnError)
	fs.SetOutput(out)
	addr := fs.String("addr", envOr("SECKILL_ADMIN_ADDR", "http://127.0.0.1:8081"), "admin API base URL")
	tok := fs.String("token", "", "admin bearer token (visible in ps: prefer SECKILL_ADMIN_TOKEN or --token-file)")
	tokFile := fs.String("token-file", "", "file whose first line is the admin bearer token (- reads stdin)")
	asJSON := fs.Bool("json", false, "print the admin API's JSON answer instead of a table")
	repair := fs.Bool("repair", false, "reconcile: apply the provably safe repairs")
	interval := fs.Duration("interval", time.Second, "watch: time between frames")
	count := fs.Int("count", 0, "watch: stop after this many frames (0: until Ctrl-C)")
	state := fs.String("state", "", "risk unchecked: only records in this state (pending, allow, deny)")
	limit := fs.Int("limit", 0, "risk unchecked: at most this many records (default 100); why: entries per page (default 20, at most 100)")
	cursor := fs.String("cursor", "", "why: continue after this cursor (the last page's next)")

	fs.Usage = func() { fmt.Fprint(out, adminUsage) }
	a, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(a) == 0 || a[0] == "help" {
		fmt.Fprint(out, adminUsage)
		return nil
	}
	token, err := cliAdminToken(*tok, *tokFile)
	if err != nil {
		return err
	}
	c := adminClient{base: strings.TrimRight(*addr, "/"), token: token, http: &http.Client{Timeout: 30 * time.Second}}
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
		method, path, render = "POST", "/admin/v1/activities", renderActivities
	case "state":
		if err := need(2); err != nil {
			return err
		}
		method, path, body, render = "PUT", "/admin/v1/activities/"+a[1]+"/state", map[string]string{"state": strings.ToUpper(a[2])}, renderActivities
	case "risk":
		if len(a) > 1 && a[1] == "unchecked" {
			n := 100
			fs.Visit(func(f *flag.Flag) {
				if f.Name == "limit" {
					n = *limit
				}
			})
			if n < 1 || n > 10_000 {
				return fmt.Errorf("risk unchecked: --limit must be 1..10000")
			}
			q := url.Values{"limit": {strconv.Itoa(n)}}
			if *state != "" {
				q.Set("state", *state)
			}
			method, path, render = "GET", "/admin/v1/risk/unchecked?"+q.Encode(), renderUnchecked
			break
		}
		return adminRisk(c, a[1:], *asJSON, out)
	case "degrade":
		if len(a) == 1 {
			method, path, render = "GET", "/admin/v1/degrade", renderDegrade
			break
		}
		if _, err := strconv.ParseInt(a[1], 10, 64); err != nil {
			return fmt.Errorf("degrade: %q is not an activity id", a[1])
		}
		b, err := degradeBody(a[2:])
		if err != nil {
			return err
		}
		method, path, body, render = "PUT", "/admin/v1/activities/"+a[1]+"/degrade", b, renderDegrade
	case "routes":
		if len(a) == 1 {
			method, path, render = "GET", "/admin/v1/routes", renderRoutes
			break
		}
		if err := need(2); err != nil {
			return err
		}
		var open bool
		switch strings.ToLower(a[2]) {
		case "open", "on":
			open = true
		case "closed", "close", "off":
		default:
			return fmt.Errorf("routes: %q must be open or closed", a[2])
		}
		if strings.ContainsAny(a[1], "/?# ") {
			return fmt.Errorf("routes: %q is not a route name", a[1])
		}
		method, path, body, render = "PUT", "/admin/v1/routes/"+a[1], map[string]bool{"open": open}, renderRoutes
	case "mode":
		return adminMode(c, a[1:], *asJSON, out)
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
		method, path, body, render = "PUT", "/admin/v1/skus/"+a[1]+"/soldout", b, renderSoldOut
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
		method, path, body, render = "POST", "/admin/v1/skus/"+a[1]+"/restock", b, renderRestock
	case "stock":
		if err := need(1); err != nil {
			return err
		}
		method, path, render = "GET", "/admin/v1/activities/"+a[1]+"/stock", renderStock
	case "request":
		if err := need(1); err != nil {
			return err
		}
		method, path, render = "GET", "/admin/v1/requests/"+a[1], renderStory
	case "why":
		if err := need(1); err != nil {
			return err
		}
		p, err := whyPath(a[1:], *cursor, *limit)
		if err != nil {
			return err
		}
		method, path, render = "GET", p, renderWhy
	case "reconcile":
		method, path, render = "POST", "/admin/v1/reconcile", renderReconcileAnswer
		if *repair {
			path += "?repair=true"
		}
	case "lag":
		method, path, render = "GET", "/admin/v1/lag", renderLag
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
	case "watch":
		if err := need(1); err != nil {
			return err
		}
		if _, err := strconv.ParseInt(a[1], 10, 64); err != nil {
			return fmt.Errorf("watch: activity %q is not a number", a[1])
		}
		if *interval < 100*time.Millisecond {
			return fmt.Errorf("watch: --interval must be at least 100ms")
		}
		if *count < 0 {
			return fmt.Errorf("watch: --count must not be negative")
		}
		// Ctrl-C ends the console quietly (exit 0); the terminal keeps the
		// last frame.
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		w := &watch{c: c, activity: a[1], every: *interval, count: *count, asJSON: *asJSON, ansi: isTerminal(out), now: time.Now}
		return w.run(ctx, out)
	default:
		return fmt.Errorf("unknown admin command %q; see seckill admin help", a[0])
	}
	if body != nil {
		raw, _ = json.Marshal(body)
	}
	status, resp, err := c.do(context.Background(), method, path, raw)
	if err != nil {
		return err
	}
	if status >= 300 {
		if *asJSON {
			out.Write(resp)
			fmt.Fprintln(out)
		}
		return apiError(method, path, status, resp)
	}
	if *asJSON {
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

// parseInterleaved parses fs's flags wherever they stand among the
// positional arguments ("stock 1 --json" as well as "--json stock 1") and
// answers the positional ones in order.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// apiError is an admin API answer other than 2xx, with its code and message.
func apiError(method, path string, status int, resp []byte) error {
	var e struct{ Code, Message string }
	_ = json.Unmarshal(resp, &e)
	return fmt.Errorf("%s %s: %d %s: %s", method, path, status, e.Code, e.Message)
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

func (c adminClient) do(ctx context.Context, method, path string, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, bytes.NewReader(body))
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

// statusError is an admin API answer other than 2xx.
type statusError struct {
	status int
	err    error
}

func (e *statusError) Error() string { return e.err.Error() }

// get reads path into v; an answer other than 2xx is a *statusError.
func (c adminClient) get(ctx context.Context, path string, v any) error {
	status, resp, err := c.do(ctx, "GET", path, nil)
	if err != nil {
		return err
	}
	if status >= 300 {
		return &statusError{status: status, err: apiError("GET", path, status, resp)}
	}
	if err := json.Unmarshal(resp, v); err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	return nil
}

// degradeBody reads the SWITCH=VALUE arguments of `seckill admin degrade
// ACTIVITY` into the admin API's body.
func degradeBody(args []string) (map[string]any, error) {
	if len(args) == 0 {
		return nil, errors.New("degrade ACTIVITY needs at least one of reservedOnly=on|off, pollAfterMs=N, paused=on|off")
	}
	b := map[string]any{}
	for _, arg := range args {
		k, v, ok := strings.Cut(arg, "=")
		if !ok {
			return nil, fmt.Errorf("degrade: %q is not SWITCH=VALUE", arg)
		}
		switch k {
		case "reservedOnly", "paused":
			on, err := onOff(v)
			if err != nil {
				return nil, fmt.Errorf("degrade %s: %w", k, err)
			}
			b[k] = on
		case "pollAfterMs":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 || n > 60_000 {
				return nil, fmt.Errorf("degrade pollAfterMs: %q must be 0..60000", v)
			}
			b[k] = n
		default:
			return nil, fmt.Errorf("degrade: no switch %q (reservedOnly, pollAfterMs, paused)", k)
		}
	}
	return b, nil
}

func onOff(v string) (bool, error) {
	switch strings.ToLower(v) {
	case "on", "true", "yes", "1":
		return true, nil
	case "off", "false", "no", "0":
		return false, nil
	}
	return false, fmt.Errorf("%q must be on or off", v)
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
	status, resp, err := c.do(context.Background(), "PUT", path, []byte(`{"onError":"`+policy+`"}`))
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
		what := "purchases pass by the local rules, recorded and re-checked once it is back (seckill admin risk unchecked)"
		if policy == "deny" {
			what = "purchases are answered 503 BUSY"
		}
		fmt.Fprintf(out, "activity %s: when the risk service times out or fails, %s\n", args[0], what)
	}
	return nil
}

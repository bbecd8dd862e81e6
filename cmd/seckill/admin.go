package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"seckill/admin"
	"seckill/admin/client"
	"seckill/reconcile"
	"seckill/sale"
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
  prequeue SKU [activity=A] [order]   the record of the SKU's pre-queue draw (seed, cutoff, how
                                      many served, done); order: the offsets in the order served
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
	case flagToken != "":
		fmt.Fprintln(adminWarnings, "seckill admin: warning: --token is visible to every user of this machine (ps); use SECKILL_ADMIN_TOKEN or --token-file")
		return flagToken, nil
	}
	return client.Token(file, os.Stdin)
}

// shown pairs a client method's answer with the table that prints it
// (without --json).
func shown[T any](table func(T, io.Writer) error) func(T, error) (func(io.Writer) error, error) {
	return func(v T, err error) (func(io.Writer) error, error) {
		return func(out io.Writer) error { return table(v, out) }, err
	}
}

// idArg parses a command's id argument.
func idArg(cmd, what, s string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%s: %s %q is not a positive integer", cmd, what, s)
	}
	return n, nil
}

// runAdmin is `seckill admin`: one call of the admin API per command, or
// the live console (watch).
func runAdmin(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("admin", flag.ContinueOnError)
	fs.SetOutput(out)
	addr := fs.String("addr", envOr("SECKILL_ADMIN_ADDR", client.DefaultAddr), "admin API base URL")
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
	opt := adminOptions{repair: *repair, state: *state, cursor: *cursor, limit: *limit}
	fs.Visit(func(f *flag.Flag) { opt.limitSet = opt.limitSet || f.Name == "limit" })
	c := client.New(*addr, token, nil)
	if a[0] == "watch" {
		return adminWatch(c, a, *interval, *count, *asJSON, out)
	}
	var raw []byte // the API's answer, for --json
	table, err := adminCall(client.WithRaw(context.Background(), &raw), c, a, opt)
	if err != nil {
		return adminFailed(err, *asJSON, out)
	}
	if *asJSON {
		printJSON(raw, out)
		return nil
	}
	return table(out)
}

// adminOptions are the flags of single commands.
type adminOptions struct {
	repair        bool
	state, cursor string
	limit         int
	limitSet      bool // --limit given (0 included)
}

// adminCall makes the one admin API call of command a and answers the
// table that prints its answer. Arguments are checked before the call.
func adminCall(ctx context.Context, c *client.Client, a []string, opt adminOptions) (func(io.Writer) error, error) {
	if want := adminArgs[a[0]]; len(a)-1 < want {
		return nil, fmt.Errorf("%s needs %d argument(s); see seckill admin help", a[0], want)
	}
	// optActivity is the optional [ACTIVITY] argument at a[i]; 0 when absent.
	optActivity := func(i int) (int64, error) {
		if len(a) <= i {
			return 0, nil
		}
		return idArg(a[0], "activity", a[i])
	}
	switch a[0] {
	case "activities":
		return shown(renderActivities)(c.Activities(ctx))
	case "create":
		act, err := readActivity(a[1])
		if err != nil {
			return nil, err
		}
		return shown(renderActivity)(c.CreateActivity(ctx, act))
	case "state":
		id, err := idArg("state", "activity", a[1])
		if err != nil {
			return nil, err
		}
		return shown(renderActivity)(c.SetState(ctx, id, strings.ToUpper(a[2])))
	case "risk":
		if a[1] == "unchecked" {
			n := 100
			if opt.limitSet {
				n = opt.limit
			}
			if n < 1 || n > 10_000 {
				return nil, fmt.Errorf("risk unchecked: --limit must be 1..10000")
			}
			return shown(renderUnchecked)(c.Unchecked(ctx, opt.state, n))
		}
		if len(a) != 3 {
			return nil, fmt.Errorf("risk needs ACTIVITY allow|deny; see seckill admin help")
		}
		id, err := strconv.ParseInt(a[1], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("risk: %q is not an activity id", a[1])
		}
		policy := strings.ToLower(a[2])
		if policy != sale.RiskAllow && policy != sale.RiskDeny {
			return nil, fmt.Errorf("risk: policy %q must be allow or deny", a[2])
		}
		return shown(renderRisk)(c.SetRisk(ctx, id, policy))
	case "degrade":
		if len(a) == 1 {
			return shown(renderDegrade)(c.Degrade(ctx))
		}
		id, err := strconv.ParseInt(a[1], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("degrade: %q is not an activity id", a[1])
		}
		ch, err := degradeChange(a[2:])
		if err != nil {
			return nil, err
		}
		return shown(func(v admin.DegradeView, out io.Writer) error {
			return renderDegrade([]admin.DegradeView{v}, out)
		})(c.SetDegrade(ctx, id, ch))
	case "routes":
		if len(a) == 1 {
			return shown(renderRoutes)(c.Routes(ctx))
		}
		if len(a) < 3 {
			return nil, fmt.Errorf("routes needs 2 argument(s); see seckill admin help")
		}
		var open bool
		switch strings.ToLower(a[2]) {
		case "open", "on":
			open = true
		case "closed", "close", "off":
		default:
			return nil, fmt.Errorf("routes: %q must be open or closed", a[2])
		}
		if strings.ContainsAny(a[1], "/?# ") {
			return nil, fmt.Errorf("routes: %q is not a route name", a[1])
		}
		return shown(renderRoutes)(c.SetRoute(ctx, a[1], open))
	case "mode":
		return adminMode(ctx, c, a[1:])
	case "prequeue":
		return adminPrequeue(ctx, c, a[1:])
	case "soldout":
		sku, err := idArg("soldout", "sku", a[1])
		if err != nil {
			return nil, err
		}
		v, err := strconv.ParseBool(a[2])
		if err != nil {
			return nil, fmt.Errorf("soldout: %q is not true or false", a[2])
		}
		act, err := optActivity(3)
		if err != nil {
			return nil, err
		}
		return shown(renderSoldOut)(c.SetSoldOut(ctx, sku, admin.SoldOutChange{SoldOut: &v, ActivityID: act}))
	case "restock":
		sku, err := idArg("restock", "sku", a[1])
		if err != nil {
			return nil, err
		}
		n, err := strconv.ParseInt(a[2], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("restock: units %q is not a number", a[2])
		}
		act, err := optActivity(3)
		if err != nil {
			return nil, err
		}
		return shown(renderRestock)(c.Restock(ctx, sku, admin.RestockRequest{Units: n, ActivityID: act}))
	case "stock":
		id, err := idArg("stock", "activity", a[1])
		if err != nil {
			return nil, err
		}
		return shown(renderStock)(c.Stock(ctx, id))
	case "request":
		return shown(renderStory)(c.Request(ctx, a[1]))
	case "why":
		user, err := idArg("why", "user", a[1])
		if err != nil {
			return nil, err
		}
		act, err := optActivity(2)
		if err != nil {
			return nil, err
		}
		return shown(renderWhy)(c.UserRequests(ctx, user, act, opt.cursor, opt.limit))
	case "reconcile":
		return shown(func(rep reconcile.Report, out io.Writer) error { renderReconcile(rep, out); return nil })(c.Reconcile(ctx, opt.repair))
	case "lag":
		return shown(renderLag)(c.Lag(ctx))
	case "blocklist":
		return shown(renderBlocklist)(c.Blocklist(ctx))
	case "block", "unblock":
		block := a[0] == "block"
		switch a[1] {
		case "ip":
			if strings.ContainsAny(a[2], " ?#") {
				return nil, fmt.Errorf("%s ip: %q is not an address or CIDR prefix", a[0], a[2])
			}
			call := c.UnblockIP
			if block {
				call = c.BlockIP
			}
			return shown(renderBlock)(call(ctx, a[2]))
		case "user":
			id, err := strconv.ParseInt(a[2], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%s user: %q is not a user id", a[0], a[2])
			}
			call := c.UnblockUser
			if block {
				call = c.BlockUser
			}
			return shown(renderBlock)(call(ctx, id))
		}
		return nil, fmt.Errorf("%s takes ip or user, not %q; see seckill admin help", a[0], a[1])
	}
	return nil, fmt.Errorf("unknown admin command %q; see seckill admin help", a[0])
}

// adminArgs are the arguments each command needs at least.
var adminArgs = map[string]int{"create": 1, "state": 2, "risk": 1, "soldout": 2, "restock": 2, "stock": 1,
	"request": 1, "why": 1, "block": 2, "unblock": 2}

// adminWatch is `seckill admin watch ACTIVITY`: the live console.
func adminWatch(c *client.Client, a []string, every time.Duration, count int, asJSON bool, out io.Writer) error {
	if len(a) < 2 {
		return fmt.Errorf("watch needs 1 argument(s); see seckill admin help")
	}
	id, err := strconv.ParseInt(a[1], 10, 64)
	if err != nil {
		return fmt.Errorf("watch: activity %q is not a number", a[1])
	}
	if every < 100*time.Millisecond {
		return fmt.Errorf("watch: --interval must be at least 100ms")
	}
	if count < 0 {
		return fmt.Errorf("watch: --count must not be negative")
	}
	// Ctrl-C ends the console quietly (exit 0); the terminal keeps the
	// last frame.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	w := &watch{c: c, activity: id, every: every, count: count, asJSON: asJSON, ansi: isTerminal(out), now: time.Now}
	return w.run(ctx, out)
}

// adminFailed is a command's failure: with --json the API's answer is
// printed first, as it came.
func adminFailed(err error, asJSON bool, out io.Writer) error {
	var e *client.Error
	if asJSON && errors.As(err, &e) {
		out.Write(e.Body)
		fmt.Fprintln(out)
	}
	return err
}

// readActivity reads the activity of `create FILE.json` ("-": stdin),
// strictly: a field the API does not know is refused here, as the API
// would.
func readActivity(file string) (sale.Activity, error) {
	var b []byte
	var err error
	if file == "-" {
		b, err = io.ReadAll(os.Stdin)
	} else {
		b, err = os.ReadFile(file)
	}
	if err != nil {
		return sale.Activity{}, err
	}
	var a sale.Activity
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return sale.Activity{}, fmt.Errorf("create %s: %w", file, err)
	}
	if dec.More() {
		return sale.Activity{}, fmt.Errorf("create %s: data after the activity", file)
	}
	return a, nil
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

func envOr(k, d string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return d
}

// degradeChange reads the SWITCH=VALUE arguments of `seckill admin degrade
// ACTIVITY` into the admin API's body.
func degradeChange(args []string) (admin.DegradeChange, error) {
	var ch admin.DegradeChange
	if len(args) == 0 {
		return ch, errors.New("degrade ACTIVITY needs at least one of reservedOnly=on|off, pollAfterMs=N, paused=on|off")
	}
	for _, arg := range args {
		k, v, ok := strings.Cut(arg, "=")
		if !ok {
			return ch, fmt.Errorf("degrade: %q is not SWITCH=VALUE", arg)
		}
		switch k {
		case "reservedOnly", "paused":
			on, err := onOff(v)
			if err != nil {
				return ch, fmt.Errorf("degrade %s: %w", k, err)
			}
			if k == "paused" {
				ch.Paused = &on
			} else {
				ch.ReservedOnly = &on
			}
		case "pollAfterMs":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 || n > 60_000 {
				return ch, fmt.Errorf("degrade pollAfterMs: %q must be 0..60000", v)
			}
			ch.PollAfterMs = &n
		default:
			return ch, fmt.Errorf("degrade: no switch %q (reservedOnly, pollAfterMs, paused)", k)
		}
	}
	return ch, nil
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

// printJSON prints the API's answer indented (as it came when it is no
// JSON).
func printJSON(b []byte, out io.Writer) {
	var pretty bytes.Buffer
	if json.Indent(&pretty, b, "", "  ") == nil {
		b = pretty.Bytes()
	}
	out.Write(b)
	fmt.Fprintln(out)
}

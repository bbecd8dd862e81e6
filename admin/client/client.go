// Package client is a Go client of the admin API (package admin,
// docs/admin.md): one method per route, the bodies and answers typed by
// package admin, an answer other than 2xx returned as *Error with the
// server's code. `seckill admin` is built on it.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"seckill/admin"
	"seckill/reconcile"
	"seckill/sale"
	"seckill/web"
)

// DefaultAddr is the admin listener's address when none is given.
const DefaultAddr = "http://127.0.0.1:8081"

// TokenEnv is the environment variable that holds the admin token.
const TokenEnv = "SECKILL_ADMIN_TOKEN"

// maxAnswer bounds the bytes read of one answer: the largest (a
// reconciliation report of a big catalog) stays far below it.
const maxAnswer = 64 << 20

// Client calls the admin API at one base URL with one bearer token. Safe
// for concurrent use.
type Client struct {
	base  string
	token string
	http  *http.Client
}

// New returns a client of the admin API at base ("http://host:port"; a
// trailing slash is dropped) with token. hc nil: a client with a 30 s
// timeout per call.
func New(base, token string, hc *http.Client) *Client {
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	return &Client{base: strings.TrimRight(base, "/"), token: token, http: hc}
}

// Token reads the admin token: the first line of file ("-": the first
// line of stdin) when file is set, else $SECKILL_ADMIN_TOKEN. A file whose
// first line is empty is an error, never an empty token.
func Token(file string, stdin io.Reader) (string, error) {
	if file == "" {
		return os.Getenv(TokenEnv), nil
	}
	var b []byte
	var err error
	if file == "-" {
		b, err = io.ReadAll(io.LimitReader(stdin, 4096))
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
}

// Error is an answer other than 2xx: its status and the server's
// admin.Error (when the body was not one, as from a proxy in between: no
// Code, and the status text as the Message).
type Error struct {
	Method, Path string
	Status       int
	Code         string
	Message      string
	Body         []byte // the answer as sent
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s %s: %d %s: %s", e.Method, e.Path, e.Status, e.Code, e.Message)
}

// StatusOf is the status of an *Error in err's chain, 0 when there is none
// (the call did not get an answer).
func StatusOf(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

// call sends body (JSON-encoded unless nil) and decodes a 2xx answer into
// out. An answer out cannot hold is an error, never a zero value.
func (c *Client) call(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("%s %s: %w", method, path, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("admin API at %s: %w", c.base, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if len(b) > maxAnswer {
		return fmt.Errorf("%s %s: answer over %d bytes", method, path, maxAnswer)
	}
	if dst, ok := ctx.Value(rawKey{}).(*[]byte); ok {
		*dst = b
	}
	if resp.StatusCode < 200 || resp.StatusCode >= 300 {
		e := &Error{Method: method, Path: path, Status: resp.StatusCode, Body: b}
		var ae admin.Error
		if json.Unmarshal(b, &ae) == nil && ae.Code != "" {
			e.Code, e.Message = ae.Code, ae.Message
		} else {
			e.Message = http.StatusText(resp.StatusCode)
		}
		return e
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%s %s: %d answer: %w", method, path, resp.StatusCode, err)
	}
	return nil
}

type rawKey struct{}

// WithRaw returns a context whose calls also keep the answer's bytes, as
// the server sent them, in *dst (2xx or not): for a caller that shows the
// answer itself (`seckill admin --json`), fields this client does not know
// included. One call at a time per context.
func WithRaw(ctx context.Context, dst *[]byte) context.Context {
	return context.WithValue(ctx, rawKey{}, dst)
}

func id(n int64) string { return strconv.FormatInt(n, 10) }

// Activities is GET /admin/v1/activities: every activity of the catalog.
func (c *Client) Activities(ctx context.Context) ([]sale.Activity, error) {
	var v []sale.Activity
	return v, c.call(ctx, "GET", "/admin/v1/activities", nil, &v)
}

// CreateActivity is POST /admin/v1/activities: create or replace and
// preheat a; the answer is the activity as the catalog holds it.
func (c *Client) CreateActivity(ctx context.Context, a sale.Activity) (sale.Activity, error) {
	var v sale.Activity
	return v, c.call(ctx, "POST", "/admin/v1/activities", a, &v)
}

// SetState is PUT /admin/v1/activities/{id}/state: sale.StateOnline or
// sale.StateOffline.
func (c *Client) SetState(ctx context.Context, activity int64, state string) (sale.Activity, error) {
	var v sale.Activity
	return v, c.call(ctx, "PUT", "/admin/v1/activities/"+id(activity)+"/state", admin.StateChange{State: state}, &v)
}

// SetRisk is PUT /admin/v1/activities/{id}/risk: the activity's policy on
// a risk-service timeout or error (sale.RiskAllow, sale.RiskDeny).
func (c *Client) SetRisk(ctx context.Context, activity int64, onError string) (admin.RiskAnswer, error) {
	var v admin.RiskAnswer
	return v, c.call(ctx, "PUT", "/admin/v1/activities/"+id(activity)+"/risk", admin.RiskChange{OnError: onError}, &v)
}

// Unchecked is GET /admin/v1/risk/unchecked: purchases that passed without
// a risk verdict, in state ("" every state) and at most limit (0: the
// server's default, 100).
func (c *Client) Unchecked(ctx context.Context, state string, limit int) (admin.UncheckedView, error) {
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if state != "" {
		q.Set("state", state)
	}
	var v admin.UncheckedView
	return v, c.call(ctx, "GET", withQuery("/admin/v1/risk/unchecked", q), nil, &v)
}

// SetDegrade is PUT /admin/v1/activities/{id}/degrade: the switches ch
// names change.
func (c *Client) SetDegrade(ctx context.Context, activity int64, ch admin.DegradeChange) (admin.DegradeView, error) {
	var v admin.DegradeView
	return v, c.call(ctx, "PUT", "/admin/v1/activities/"+id(activity)+"/degrade", ch, &v)
}

// Degrade is GET /admin/v1/degrade: every activity's degrade switches.
func (c *Client) Degrade(ctx context.Context) ([]admin.DegradeView, error) {
	var v []admin.DegradeView
	return v, c.call(ctx, "GET", "/admin/v1/degrade", nil, &v)
}

// Modes is GET /admin/v1/modes: every SKU's mode and drain pace.
func (c *Client) Modes(ctx context.Context) ([]admin.ModeView, error) {
	var v []admin.ModeView
	return v, c.call(ctx, "GET", "/admin/v1/modes", nil, &v)
}

// Mode is GET /admin/v1/skus/{sku}/mode: one SKU's mode; activity 0 is
// the activity selling it now.
func (c *Client) Mode(ctx context.Context, sku, activity int64) (admin.ModeView, error) {
	var v admin.ModeView
	return v, c.call(ctx, "GET", "/admin/v1/skus/"+id(sku)+"/mode"+activityQuery(activity), nil, &v)
}

// SetMode is PUT /admin/v1/skus/{sku}/mode: direct or queue, and the
// queue's drain pace.
func (c *Client) SetMode(ctx context.Context, sku int64, ch admin.ModeChange) (admin.ModeView, error) {
	var v admin.ModeView
	return v, c.call(ctx, "PUT", "/admin/v1/skus/"+id(sku)+"/mode", ch, &v)
}

// Prequeue is GET /admin/v1/skus/{sku}/prequeue: the record of the SKU's
// pre-queue draw, with the order served when order is true; activity 0 is
// the activity selling it now.
func (c *Client) Prequeue(ctx context.Context, sku, activity int64, order bool) (admin.PrequeueView, error) {
	var v admin.PrequeueView
	q := activityQuery(activity)
	if order {
		if q == "" {
			q = "?order=true"
		} else {
			q += "&order=true"
		}
	}
	return v, c.call(ctx, "GET", "/admin/v1/skus/"+id(sku)+"/prequeue"+q, nil, &v)
}

// Stock is GET /admin/v1/activities/{id}/stock: the books of each SKU.
func (c *Client) Stock(ctx context.Context, activity int64) (admin.StockReport, error) {
	var v admin.StockReport
	return v, c.call(ctx, "GET", "/admin/v1/activities/"+id(activity)+"/stock", nil, &v)
}

// SetSoldOut is PUT /admin/v1/skus/{sku}/soldout: set or clear the
// on-call sold-out mark.
func (c *Client) SetSoldOut(ctx context.Context, sku int64, ch admin.SoldOutChange) (admin.SoldOutAnswer, error) {
	var v admin.SoldOutAnswer
	return v, c.call(ctx, "PUT", "/admin/v1/skus/"+id(sku)+"/soldout", ch, &v)
}

// Restock is POST /admin/v1/skus/{sku}/restock: add units to a live SKU.
func (c *Client) Restock(ctx context.Context, sku int64, r admin.RestockRequest) (admin.RestockAnswer, error) {
	var v admin.RestockAnswer
	return v, c.call(ctx, "POST", "/admin/v1/skus/"+id(sku)+"/restock", r, &v)
}

// Request is GET /admin/v1/requests/{requestNo}: the story of one ticket.
func (c *Client) Request(ctx context.Context, requestNo string) (admin.Story, error) {
	var v admin.Story
	return v, c.call(ctx, "GET", "/admin/v1/requests/"+url.PathEscape(requestNo), nil, &v)
}

// UserRequests is GET /admin/v1/users/{id}/requests: a buyer's attempts
// and tickets, newest first, in activity (0: every one), after cursor (""
// the first page), at most limit (0: the server's default, 20).
func (c *Client) UserRequests(ctx context.Context, user, activity int64, cursor string, limit int) (admin.UserRequests, error) {
	q := url.Values{}
	if activity > 0 {
		q.Set("activity", id(activity))
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var v admin.UserRequests
	return v, c.call(ctx, "GET", withQuery("/admin/v1/users/"+id(user)+"/requests", q), nil, &v)
}

// Reconcile is POST /admin/v1/reconcile: run a reconciliation now,
// applying the provably safe repairs when repair.
func (c *Client) Reconcile(ctx context.Context, repair bool) (reconcile.Report, error) {
	p := "/admin/v1/reconcile"
	if repair {
		p += "?repair=true"
	}
	var v reconcile.Report
	return v, c.call(ctx, "POST", p, nil, &v)
}

// Lag is GET /admin/v1/lag: the consumer group's lag (503, StatusOf, from
// a process without a lag reader).
func (c *Client) Lag(ctx context.Context) (admin.LagReport, error) {
	var v admin.LagReport
	return v, c.call(ctx, "GET", "/admin/v1/lag", nil, &v)
}

// Routes is GET /admin/v1/routes: the non-core buyer routes' switches.
func (c *Client) Routes(ctx context.Context) ([]admin.RouteView, error) {
	var v []admin.RouteView
	return v, c.call(ctx, "GET", "/admin/v1/routes", nil, &v)
}

// SetRoute is PUT /admin/v1/routes/{name}: open or close one of them at
// every edge; the answer is every route's switch.
func (c *Client) SetRoute(ctx context.Context, name string, open bool) ([]admin.RouteView, error) {
	var v []admin.RouteView
	return v, c.call(ctx, "PUT", "/admin/v1/routes/"+url.PathEscape(name), admin.RouteChange{Open: &open}, &v)
}

// Blocklist is GET /admin/v1/blocklist: the IP and user blocklists.
func (c *Client) Blocklist(ctx context.Context) (admin.BlocklistView, error) {
	var v admin.BlocklistView
	return v, c.call(ctx, "GET", "/admin/v1/blocklist", nil, &v)
}

// BlockIP is PUT /admin/v1/blocklist/ips/{ip}: an address or a CIDR
// prefix ("10.0.0.0/8", its slash kept).
func (c *Client) BlockIP(ctx context.Context, ip string) (admin.BlockAnswer, error) {
	return c.blockIP(ctx, "PUT", ip)
}

// UnblockIP is DELETE /admin/v1/blocklist/ips/{ip}.
func (c *Client) UnblockIP(ctx context.Context, ip string) (admin.BlockAnswer, error) {
	return c.blockIP(ctx, "DELETE", ip)
}

func (c *Client) blockIP(ctx context.Context, method, ip string) (admin.BlockAnswer, error) {
	var v admin.BlockAnswer
	// The route's parameter is a catch-all: a prefix's slash stays one.
	esc := strings.ReplaceAll(url.PathEscape(ip), "%2F", "/")
	return v, c.call(ctx, method, "/admin/v1/blocklist/ips/"+esc, nil, &v)
}

// BlockUser is PUT /admin/v1/blocklist/users/{id}.
func (c *Client) BlockUser(ctx context.Context, user int64) (admin.BlockAnswer, error) {
	var v admin.BlockAnswer
	return v, c.call(ctx, "PUT", "/admin/v1/blocklist/users/"+id(user), nil, &v)
}

// UnblockUser is DELETE /admin/v1/blocklist/users/{id}.
func (c *Client) UnblockUser(ctx context.Context, user int64) (admin.BlockAnswer, error) {
	var v admin.BlockAnswer
	return v, c.call(ctx, "DELETE", "/admin/v1/blocklist/users/"+id(user), nil, &v)
}

// Counters is GET /admin/v1/counters (mounted by the process beside the
// admin routes): the counters the on-call page turns into rates.
func (c *Client) Counters(ctx context.Context) ([]web.Counter, error) {
	var v []web.Counter
	return v, c.call(ctx, "GET", "/admin/v1/counters", nil, &v)
}

func withQuery(path string, q url.Values) string {
	if len(q) == 0 {
		return path
	}
	return path + "?" + q.Encode()
}

// activityQuery is ?activityId=A, or nothing for 0.
func activityQuery(activity int64) string {
	if activity == 0 {
		return ""
	}
	return "?activityId=" + id(activity)
}

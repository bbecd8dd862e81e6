package app

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"seckill/sale"

	"seckill/internal/testenv"
)

// artifacts is where the browser tests leave their screenshots
// ($SECKILL_ARTIFACTS, default artifacts/screenshots at the repository root).
func artifacts(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("SECKILL_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("..", "..", "..", "artifacts")
	}
	dir = filepath.Join(dir, "screenshots")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// browser starts headless Chromium (Debian's chromium; make test installs
// it) and returns a context for one tab, closed when the test ends.
func browser(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("chromium is required by the browser tests (apt-get install -y chromium, or make test): %v", err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1200, 900),
	)
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancel2 := chromedp.NewContext(actx)
	t.Cleanup(cancel2)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

func tab(t *testing.T, parent context.Context) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewContext(parent)
	t.Cleanup(cancel)
	// The first run opens the tab and must not carry a timeout (its end
	// would close the tab); later runs are bounded by run().
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("open tab: %v", err)
	}
	return ctx
}

func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	p := filepath.Join(artifacts(t), name)
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", p)
}

// run runs chromedp actions with a deadline.
func run(t *testing.T, ctx context.Context, d time.Duration, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	if err := chromedp.Do(c, actions...); err != nil {
		screenshot(t, ctx, "failure-"+strings.ReplaceAll(t.Name(), "/", "_")+".png")
		t.Fatalf("browser: %v", err)
	}
}

// text reads an element's text.
func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	s, err := chromedp.Run(c, chromedp.Evaluate[string](`document.querySelector(`+strconv.Quote(sel)+`).textContent`))
	if err != nil {
		t.Fatalf("text of %s: %v", sel, err)
	}
	return s
}

// count counts the elements matching sel.
func count(t *testing.T, ctx context.Context, sel string) int {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	n, err := chromedp.Run(c, chromedp.Evaluate[int](`document.querySelectorAll(`+strconv.Quote(sel)+`).length`))
	if err != nil {
		t.Fatalf("count %s: %v", sel, err)
	}
	return n
}

// chartState is what the on-call page's charts show: how many canvases,
// the points of SKU 1001's remaining-stock chart (and its last and highest
// value), that chart's painted pixels and its picture.
type chartState struct {
	Canvases     int    `json:"canvases"`
	Points       int    `json:"points"`
	Remaining    int    `json:"remaining"`
	MaxRemaining int    `json:"maxRemaining"`
	Painted      int    `json:"painted"`
	Image        string `json:"image"`
}

func (s chartState) short() chartState { s.Image = strconv.Itoa(len(s.Image)) + " bytes"; return s }

func charts(t *testing.T, ctx context.Context) chartState {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	s, err := chromedp.Run(c, chromedp.Evaluate[chartState](`(() => {
		const u = window.seckillCharts["stock-1-1001"];
		const cv = document.querySelector("#chart-stock-1-1001 canvas");
		const px = cv.getContext("2d").getImageData(0, 0, cv.width, cv.height).data;
		let painted = 0;
		for (let i = 3; i < px.length; i += 4) if (px[i] > 0) painted++;
		const ys = u.data[1].filter((v) => v != null);
		return { canvases: document.querySelectorAll("#charts canvas").length, points: u.data[0].length,
			remaining: ys[ys.length - 1], maxRemaining: Math.max(...ys), painted, image: cv.toDataURL() };
	})()`))
	if err != nil {
		t.Fatalf("read the charts: %v", err)
	}
	return s
}

// skuChartState is what a SKU's accepted / rejected chart shows: its
// points, the highest rate of each series, its painted pixels and its
// picture.
type skuChartState struct {
	Points      int     `json:"points"`
	MaxAccepted float64 `json:"maxAccepted"`
	MaxRejected float64 `json:"maxRejected"`
	Painted     int     `json:"painted"`
	Image       string  `json:"image"`
}

func (s skuChartState) short() skuChartState {
	s.Image = strconv.Itoa(len(s.Image)) + " bytes"
	return s
}

func skuChart(t *testing.T, ctx context.Context, name string) skuChartState {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	s, err := chromedp.Run(c, chromedp.Evaluate[skuChartState](`((name) => {
		const u = window.seckillCharts[name];
		const cv = document.querySelector("#chart-" + name + " canvas");
		const px = cv.getContext("2d").getImageData(0, 0, cv.width, cv.height).data;
		let painted = 0;
		for (let i = 3; i < px.length; i += 4) if (px[i] > 0) painted++;
		const top = (ys) => Math.max(0, ...ys.filter((v) => v != null));
		return { points: u.data[0].length, maxAccepted: top(u.data[1]), maxRejected: top(u.data[2]), painted, image: cv.toDataURL() };
	})(`+strconv.Quote(name)+`)`))
	if err != nil {
		t.Fatalf("read the chart %s: %v", name, err)
	}
	return s
}

// pollTrue waits until a JavaScript expression is true.
func pollTrue(expr string, opts ...chromedp.PollOption) chromedp.Action[chromedp.Void] {
	p := chromedp.Poll[bool](expr, opts...)
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := p(ctx, t)
		return chromedp.Void{}, err
	}
}

// clickLive clicks sel's element inside the page, in one step, once it is
// there and shown: the on-call page redraws its rows as it polls, so a
// node found by one DevTools call may be gone by the next one (Click).
func clickLive(sel string) chromedp.Action[chromedp.Void] {
	return pollTrue(`(() => { const e = document.querySelector(`+strconv.Quote(sel)+`);
		if (!e || e.offsetParent === null) return false; e.click(); return true })()`,
		chromedp.WithPollingTimeout(10*time.Second))
}

// TestPagesInABrowser buys through the buyer page and sees SUCCESS and the
// order in "My orders", then flips sold-out on the on-call page, sees its
// charts drawn and moving (the per-SKU accepted / rejected charts while a
// crowd buys), and watches the buy button grey out.
func TestPagesInABrowser(t *testing.T) {
	testenv.Long(t)
	// Its one purchase must be accepted: see crowdBudgets.
	c := startClusterWith(t, mode{driver: "sqlite"}, crowdBudgets)
	c.preheat(t, openActivity(1,
		sale.SKU{ID: 1001, Stock: 10, Price: 9900, LimitPerUser: 1, Title: "Tea cup <b>x</b>", OriginalPrice: 12900},
		sale.SKU{ID: 1002, Stock: 10, Price: 1990, LimitPerUser: 1, Hot: true}))
	b := browser(t)

	// The buyer page: buy SKU 1001, follow the ticket to SUCCESS. The
	// buttons are enabled as soon as the view loads, but the page's first
	// tick (up to 250ms later) fills in the countdown label and moves them
	// down by a line: a click aimed before it lands above the button and
	// buys nothing. So the phase (set by that tick) must read OPEN first.
	buyer := tab(t, b)
	run(t, buyer, 30*time.Second,
		chromedp.Navigate(c.base+"/sale?activity=1&user=4242"),
		pollTrue(`document.getElementById("phase").textContent === "OPEN"`, chromedp.WithPollingTimeout(20*time.Second)),
		chromedp.WaitEnabled(chromedp.CSS(`#sku-1001 button`)),
		chromedp.Click(chromedp.CSS(`#sku-1001 button`)),
		chromedp.WaitVisible(chromedp.CSS(`#ticket-card`)),
		pollTrue(`document.getElementById("result").textContent === "SUCCESS"`, chromedp.WithPollingTimeout(20*time.Second)),
	)
	// The product's title (as text, never markup) and its price before
	// the sale; a SKU without them is named by its id.
	if title, orig, other := text(t, buyer, "#sku-1001 .title"), text(t, buyer, "#sku-1001 .original"),
		text(t, buyer, "#sku-1002 .title"); title != "Tea cup <b>x</b>" || orig != "¥129.00" || other != "SKU 1002" {
		t.Fatalf("buyer page shows title %q, original price %q; SKU 1002 %q", title, orig, other)
	}
	result, ticket := text(t, buyer, "#result"), text(t, buyer, "#ticket")
	if result != "SUCCESS" || ticket == "" {
		t.Fatalf("buyer page shows %q for ticket %q", result, ticket)
	}
	if got := c.result(t, ticket, 4242); got.Code != sale.ResultSuccess {
		t.Fatalf("the API disagrees with the page: %+v", got)
	}
	screenshot(t, buyer, "buyer-page.png")

	// "My orders" was read again when the purchase succeeded: the new
	// order is listed, and it is the buyer's only one.
	row := "#order-O" + ticket
	run(t, buyer, 30*time.Second,
		pollTrue(`document.querySelector(`+strconv.Quote(row)+`) !== null`, chromedp.WithPollingTimeout(10*time.Second)),
	)
	if st, sku := text(t, buyer, row+" .state"), text(t, buyer, row+" .sku"); st != "PENDING_PAYMENT" || sku != "1001" {
		t.Fatalf("my orders row %s: state %q sku %q", row, st, sku)
	}
	if rows := count(t, buyer, "#orders tr"); rows != 1 {
		t.Fatalf("my orders lists %d rows, want the one order", rows)
	}
	screenshot(t, buyer, "buyer-my-orders.png")

	// The on-call page: log in, mark SKU 1002 sold out (two steps).
	oncall := tab(t, b)
	run(t, oncall, 30*time.Second,
		chromedp.Navigate(c.admin+"/admin/ui"),
		chromedp.WaitVisible(chromedp.CSS(`#token`)),
		chromedp.SendKeys(chromedp.CSS(`#token`), c.cfg.Admin.Token),
		chromedp.Click(chromedp.CSS(`#login-form button`)),
		chromedp.WaitVisible(chromedp.CSS(`#row-1-1001`)),
		pollTrue(`document.querySelector("#row-1-1001 .remaining").textContent === "9"`, chromedp.WithPollingTimeout(10*time.Second)),
		clickLive(`#soldout-1-1002`),
		chromedp.WaitVisible(chromedp.CSS(`#yes-soldout-1-1002`)),
	)
	screenshot(t, oncall, "oncall-confirm.png")
	run(t, oncall, 30*time.Second,
		clickLive(`#yes-soldout-1-1002`),
		pollTrue(`document.querySelector("#row-1-1002 .soldout").textContent.startsWith("yes")`, chromedp.WithPollingTimeout(10*time.Second)),
		// SKU 1002 into queue mode, from its row (two steps).
		clickLive(`#mode-toggle-1-1002`),
		chromedp.WaitVisible(chromedp.CSS(`#yes-mode-toggle-1-1002`)),
		clickLive(`#yes-mode-toggle-1-1002`),
		pollTrue(`document.querySelector("#mode-1-1002").textContent.startsWith("queue")`, chromedp.WithPollingTimeout(10*time.Second)),
	)
	if _, k, ok := c.sys.Catalog.Lookup(1, 1002); !ok || k.Mode != sale.ModeQueue {
		t.Fatalf("after the page's switch SKU 1002 is %+v in the catalog, want queue mode", k)
	}
	screenshot(t, oncall, "oncall-page.png")

	// The search box: buyer 4242's ticket, with its order and story.
	run(t, oncall, 30*time.Second,
		chromedp.SendKeys(chromedp.CSS(`#why-user`), "4242"),
		chromedp.Click(chromedp.CSS(`#why-form button`)),
		pollTrue(`document.querySelector(`+strconv.Quote("#why-"+ticket+" .outcome")+`) !== null`, chromedp.WithPollingTimeout(10*time.Second)),
	)
	if out, order, story := text(t, oncall, "#why-"+ticket+" .outcome"), text(t, oncall, "#why-"+ticket+" .order"),
		text(t, oncall, "#why-"+ticket+" .story"); out != "SUCCESS" || !strings.Contains(order, "PENDING_PAYMENT") ||
		!strings.Contains(story, "STOCK_OCCUPIED") {
		t.Fatalf("search row: outcome %q, order %q, story %q", out, order, story)
	}
	screenshot(t, oncall, "oncall-why.png")

	// The on-call charts: drawn (uPlot canvases with pixels on them) and
	// moving — more points with every sample, and SKU 1001's remaining
	// line follows three more purchases down.
	run(t, oncall, 30*time.Second,
		pollTrue(`(() => { const c = window.seckillCharts || {};
			return !!(c.rates && c.lag && c["stock-1-1001"] && c["stock-1-1002"]) && c.rates.data[0].length >= 2; })()`,
			chromedp.WithPollingTimeout(10*time.Second)),
	)
	before := charts(t, oncall)
	if before.Canvases < 4 || before.Painted < 500 || before.Remaining != 9 {
		t.Fatalf("charts before: %+v", before)
	}
	for u := int64(5001); u <= 5003; u++ {
		if a := c.buy(t, 1001, u); a.Status != 200 {
			t.Fatalf("buy as %d: %+v", u, a)
		}
	}
	run(t, oncall, 30*time.Second,
		pollTrue(`(() => { const d = window.seckillCharts["stock-1-1001"].data[1]; return d[d.length-1] === 6; })()`,
			chromedp.WithPollingTimeout(10*time.Second)),
		pollTrue(`Math.max(...window.seckillCharts.rates.data[1].filter((v) => v != null)) > 0`,
			chromedp.WithPollingTimeout(10*time.Second)),
	)
	after := charts(t, oncall)
	if after.Points <= before.Points || after.Image == before.Image || after.Painted < 500 || after.Remaining != 6 || after.MaxRemaining != 9 {
		t.Fatalf("the charts did not move: before %+v, after %+v", before.short(), after.short())
	}
	screenshot(t, oncall, "oncall-charts.png")

	// Per SKU, accepted and rejected purchases per second: drawn for each
	// SKU, and moving while a crowd buys — four new buyers of SKU 1001
	// (accepted), its earlier buyers again (rejected: they hold a ticket)
	// and buyers of SKU 1002, marked sold out (rejected) — each SKU's
	// chart showing only its own purchases.
	before1001, before1002 := skuChart(t, oncall, "sku-1-1001"), skuChart(t, oncall, "sku-1-1002")
	if before1001.Points < 2 || before1001.Painted < 500 || before1002.Painted < 500 || before1002.MaxAccepted != 0 {
		t.Fatalf("per-SKU charts before the crowd: 1001 %+v, 1002 %+v", before1001.short(), before1002.short())
	}
	crowd := make(chan answer, 64)
	go func() {
		defer close(crowd)
		for i := int64(0); i < 24; i++ {
			switch i % 3 {
			case 0:
				if u := 6001 + i/3; u <= 6004 {
					crowd <- c.buy(t, 1001, u)
				} else {
					crowd <- c.buy(t, 1001, 5001+i%3)
				}
			case 1:
				crowd <- c.buy(t, 1001, 5001+i%3)
			case 2:
				crowd <- c.buy(t, 1002, 7000+i)
			}
			time.Sleep(150 * time.Millisecond) // about 4 s: several samples of the page
		}
	}()
	run(t, oncall, 30*time.Second,
		pollTrue(`(() => { const c = window.seckillCharts, top = (ys) => Math.max(0, ...ys.filter((v) => v != null));
			return top(c["sku-1-1001"].data[1]) > 0 && top(c["sku-1-1001"].data[2]) > 0 && top(c["sku-1-1002"].data[2]) > 0; })()`,
			chromedp.WithPollingTimeout(20*time.Second)),
	)
	accepted := 0
	for a := range crowd {
		switch {
		case a.Status == 200:
			accepted++
		case a.Status == 0:
			t.Fatalf("a crowd purchase failed: %+v", a)
		}
	}
	if accepted != 4 {
		t.Fatalf("the crowd got %d tickets, want its 4 new buyers'", accepted)
	}
	after1001, after1002 := skuChart(t, oncall, "sku-1-1001"), skuChart(t, oncall, "sku-1-1002")
	if after1001.Points <= before1001.Points || after1001.Image == before1001.Image || after1002.Image == before1002.Image ||
		after1001.MaxAccepted <= 0 || after1001.MaxRejected <= 0 || after1002.MaxRejected <= 0 || after1002.MaxAccepted != 0 {
		t.Fatalf("the per-SKU charts did not move with the crowd (or 1002 shows purchases accepted): 1001 %+v → %+v, 1002 %+v → %+v",
			before1001.short(), after1001.short(), before1002.short(), after1002.short())
	}
	screenshot(t, oncall, "oncall-sku-charts.png")

	// The buyer page greys the button out by itself.
	run(t, buyer, 30*time.Second,
		pollTrue(`document.querySelector("#sku-1002 button").disabled && document.querySelector("#sku-1002").dataset.soldout === "true"`, chromedp.WithPollingTimeout(10*time.Second)),
	)
	label := text(t, buyer, "#sku-1002 button")
	if !strings.Contains(label, "Sold out") {
		t.Fatalf("buy button says %q", label)
	}
	screenshot(t, buyer, "buyer-sold-out.png")

	// And the API agrees: 410 for SKU 1002.
	if a := c.buy(t, 1002, 999); a.Status != 410 {
		t.Fatalf("buying a marked SKU: %+v", a)
	}

	// Degrade from the on-call page: pause activity 1's intake (two
	// steps); purchases are answered 503 PAUSED with Retry-After while the
	// buyer's result stays readable; resume it the same way.
	// The page redraws every second: each click is made in the page, on
	// the node that is there at that moment.
	run(t, oncall, 30*time.Second,
		pollTrue(clickJS("pause-toggle-1"), chromedp.WithPollingTimeout(10*time.Second)),
		pollTrue(clickJS("yes-pause-toggle-1"), chromedp.WithPollingTimeout(10*time.Second)),
		pollTrue(`document.getElementById("paused-1").textContent === "intake PAUSED"`, chromedp.WithPollingTimeout(10*time.Second)),
	)
	screenshot(t, oncall, "oncall-paused.png")
	if a := c.buy(t, 1001, 8001); a.Status != 503 || a.Code != "PAUSED" || a.RetryAfter < 1 {
		t.Fatalf("buying while paused: %+v, want 503 PAUSED with Retry-After", a)
	}
	if got := c.result(t, ticket, 4242); got.Code != sale.ResultSuccess {
		t.Fatalf("the result while paused: %+v", got)
	}
	run(t, oncall, 30*time.Second,
		pollTrue(clickJS("pause-toggle-1"), chromedp.WithPollingTimeout(10*time.Second)),
		pollTrue(clickJS("yes-pause-toggle-1"), chromedp.WithPollingTimeout(10*time.Second)),
		pollTrue(`document.getElementById("paused-1").textContent === "intake open"`, chromedp.WithPollingTimeout(10*time.Second)),
	)

	// The buyer page follows pollAfterMs: with the result stream closed
	// and queuing buyers told to wait 1.5s, a new buyer's page polls the
	// result after 1.5s, not its own half second.
	auth := "Bearer " + c.cfg.Admin.Token
	if r := send(t, "PUT", c.admin+"/admin/v1/activities/1/degrade", 0, auth, `{"pollAfterMs":1500}`); r.status != 200 {
		t.Fatalf("set pollAfterMs: %d %s", r.status, r.raw)
	}
	if r := send(t, "PUT", c.admin+"/admin/v1/routes/events", 0, auth, `{"open":false}`); r.status != 200 {
		t.Fatalf("close the events route: %d %s", r.status, r.raw)
	}
	run(t, buyer, 30*time.Second,
		chromedp.Navigate(c.base+"/sale?activity=1&user=4343"),
		pollTrue(`document.getElementById("phase").textContent === "OPEN"`, chromedp.WithPollingTimeout(20*time.Second)),
		chromedp.WaitEnabled(chromedp.CSS(`#sku-1001 button`)),
		chromedp.Click(chromedp.CSS(`#sku-1001 button`)),
		pollTrue(`document.getElementById("result").textContent === "SUCCESS"`, chromedp.WithPollingTimeout(20*time.Second)),
		pollTrue(`(window.seckillPollWaits || [])[0] === 1500`, chromedp.WithPollingTimeout(5*time.Second)),
	)
}

// clickJS is a page expression that clicks the element with id, if it is
// there, and says whether it was.
func clickJS(id string) string {
	return `(() => { const b = document.getElementById(` + strconv.Quote(id) + `); if (!b) return false; b.click(); return true; })()`
}

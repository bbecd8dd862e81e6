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

	"seckill/internal/sale"
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

// pollTrue waits until a JavaScript expression is true.
func pollTrue(expr string, opts ...chromedp.PollOption) chromedp.Action[chromedp.Void] {
	p := chromedp.Poll[bool](expr, opts...)
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := p(ctx, t)
		return chromedp.Void{}, err
	}
}

// TestPagesInABrowser buys through the buyer page and sees SUCCESS, then
// flips sold-out on the on-call page and watches the buy button grey out.
func TestPagesInABrowser(t *testing.T) {
	// Its one purchase must be accepted: see crowdBudgets.
	c := startClusterWith(t, mode{driver: "sqlite"}, crowdBudgets)
	c.preheat(t, openActivity(1,
		sale.SKU{ID: 1001, Stock: 10, Price: 9900, LimitPerUser: 1},
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
		chromedp.Click(chromedp.CSS(`#soldout-1-1002`)),
		chromedp.WaitVisible(chromedp.CSS(`#yes-soldout-1-1002`)),
	)
	screenshot(t, oncall, "oncall-confirm.png")
	run(t, oncall, 30*time.Second,
		chromedp.Click(chromedp.CSS(`#yes-soldout-1-1002`)),
		pollTrue(`document.querySelector("#row-1-1002 .soldout").textContent.startsWith("yes")`, chromedp.WithPollingTimeout(10*time.Second)),
	)
	screenshot(t, oncall, "oncall-page.png")

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
}

package web

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fasthttp/router"

	"seckill/edge"
	"seckill/internal/identity"
	"seckill/stock/results"
	"seckill/store"
)

// failingLister is an orders database that never answers.
type failingLister struct{}

func (failingLister) UserOrders(context.Context, int64, store.OrderCursor, int) ([]store.Order, error) {
	return nil, errors.New("database down")
}

// TestBuyerRoutesAnswerFromTheEdgeTable: every refusal of the result
// stream, "my orders" and the buyer page is the edge table's answer, byte
// for byte, status and body, with Retry-After exactly where the table's
// Retry sends it. A route that spelled its own answer (a code, a message, a
// missing Retry-After) fails here.
func TestBuyerRoutesAnswerFromTheEdgeTable(t *testing.T) {
	s := newStreamRig(t, edge.StreamConfig{MaxPerUser: 1, Heartbeat: time.Minute, MaxWait: time.Minute}, 5*time.Second, false)
	s.queue(t, "1-1001-1", 7)
	s.queue(t, "1-1001-2", 8)
	held := s.open(t, "1-1001-1", 7)
	held.next(t, "data: ", 2*time.Second)

	// A stream whose ticket Redis lost asks the database, which is down.
	broken := NewResultEvents(s.res, nil, edge.StreamConfig{}, func(context.Context, int64, string) (results.Entry, error) {
		return results.Entry{}, errors.New("database down")
	})
	t.Cleanup(broken.Close)
	r := router.New()
	r.GET("/e/{requestNo}", broken.Handle)
	r.GET(OrdersPath, NewOrders(ordersStore(t, 1), OrdersConfig{PayTimeout: time.Minute, PerSecond: 0.001, Burst: 1}).Handle)
	r.GET("/busy"+OrdersPath, NewOrders(failingLister{}, OrdersConfig{PayTimeout: time.Minute}).Handle)
	r.GET("/sale/{file}", Buyer)
	base := listen(t, r)
	if a := getOrders(t, base+OrdersPath, "300"); a.status != 200 {
		t.Fatalf("the burst's one read: %+v", a)
	}

	for _, c := range []struct {
		name  string
		url   string
		user  string
		want  edge.Answer
		retry bool
	}{
		{"a stream without X-User-Id", s.base + "/e/1-1001-2", "", edge.IdentityAnswer(identity.Missing), false},
		{"a stream with a malformed X-User-Id", s.base + "/e/1-1001-2", "x7", edge.IdentityAnswer(identity.Malformed), false},
		{"a stream of an unknown ticket", s.base + "/e/1-1001-9", "8", edge.AnswerNotFound, false},
		{"a stream of another buyer's ticket", s.base + "/e/1-1001-2", "9", edge.AnswerNotFound, false},
		{"a stream of a ticket number too long", s.base + "/e/" + strings.Repeat("1", 65), "8", edge.AnswerNotFound, false},
		{"a stream past the user's open streams", s.base + "/e/1-1001-1", "7", edge.AnswerTooManyStreams, true},
		{"a stream whose fallback database is down", base + "/e/1-1001-9", "8", edge.AnswerBusy, true},
		{"my orders without X-User-Id", base + OrdersPath, "", edge.IdentityAnswer(identity.Missing), false},
		{"my orders with a malformed X-User-Id", base + OrdersPath, "0", edge.IdentityAnswer(identity.Malformed), false},
		{"my orders with a bad limit", base + OrdersPath + "?limit=ten", "100", edge.AnswerBadLimit, false},
		{"my orders with a forged cursor", base + OrdersPath + "?cursor=forged", "101", edge.AnswerBadCursor, false},
		{"my orders over the user's read limit", base + OrdersPath, "300", edge.AnswerReadsLimited, true},
		{"my orders without the database", base + "/busy" + OrdersPath, "100", edge.AnswerBusy, true},
		{"a file the buyer page does not list", base + "/sale/oncall.js", "", edge.AnswerNotFound, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp := get(t, c.url, c.user)
			b, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != c.want.Status() || string(b) != string(c.want.Body()) {
				t.Fatalf("%d %s, want the table's %d %s", resp.StatusCode, b, c.want.Status(), c.want.Body())
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			if ra := resp.Header.Get("Retry-After"); c.retry != (ra != "") || c.retry && ra < "1" {
				t.Errorf("Retry-After %q, want one: %v", ra, c.retry)
			}
		})
	}
}

// TestNoBuyerRouteWritesItsOwnAnswer: the package's handlers set no status
// and write no error body of their own; answers come from the edge's table
// (edge.Answer). Counters is the admin listener's, not a buyer route.
func TestNoBuyerRouteWritesItsOwnAnswer(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	forbidden := map[string]bool{"SetStatusCode": true, "SetBodyString": true, "Refuse": true}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Name.Name == "Counters" || fn.Body == nil {
				continue
			}
			checked++
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				switch {
				case forbidden[sel.Sel.Name]:
					t.Errorf("%s: %s calls %s: answer through edge.Answer", fset.Position(call.Pos()), fn.Name.Name, sel.Sel.Name)
				case sel.Sel.Name == "Set" && len(call.Args) > 0:
					if lit, ok := call.Args[0].(*ast.BasicLit); ok && strings.EqualFold(strings.Trim(lit.Value, `"`), "Retry-After") {
						t.Errorf("%s: %s sets Retry-After itself: use edge.Answer.Retry", fset.Position(call.Pos()), fn.Name.Name)
					}
				}
				return true
			})
		}
	}
	if checked < 10 {
		t.Fatalf("checked %d functions: the scan found no code", checked)
	}
}

// TestIdentityAnswerFailsClosed: asking the table for the answer to a
// passed or unknown identity check is 500, never a 200.
func TestIdentityAnswerFailsClosed(t *testing.T) {
	for _, r := range []identity.Result{identity.OK, identity.Result(99), identity.Result(255)} {
		if a := edge.IdentityAnswer(r); a.Status() != http.StatusInternalServerError {
			t.Errorf("IdentityAnswer(%d): %d %s", r, a.Status(), a.Body())
		}
	}
}

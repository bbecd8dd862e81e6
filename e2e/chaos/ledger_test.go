package chaos

import (
	"database/sql"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	_ "modernc.org/sqlite"

	"seckill/internal/testenv"
)

// booksRig is a finished sale of one SKU written by hand into a real
// redis-server and a SQLite file, by the documented names (names.go): the
// input CheckBooks reads.
type booksRig struct {
	r  *testenv.Redis
	db *sql.DB
}

const booksSKU = 1001

func newBooksRig(t *testing.T) *booksRig {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "books.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	for _, q := range []string{
		`CREATE TABLE seckill_stock_snapshot (activity_id INTEGER, sku_id INTEGER, initial INTEGER, available INTEGER, sold INTEGER)`,
		`CREATE TABLE seckill_order (request_no TEXT, order_no TEXT, status TEXT, user_id INTEGER, sku_id INTEGER, quantity INTEGER, activity_id INTEGER)`,
		`CREATE TABLE seckill_request_log (request_no TEXT, sku_id INTEGER, user_id INTEGER, status TEXT, remark TEXT, order_no TEXT, updated_ms INTEGER, activity_id INTEGER)`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	return &booksRig{r: testenv.StartRedis(t), db: db}
}

// sell writes a sale of initial units of which buyers each bought one:
// Redis stock, sold, meta, users, claimed and results; the orders, the
// request log and the snapshot.
func (b *booksRig) sell(t *testing.T, initial int64, buyers ...string) {
	t.Helper()
	k := keysOf(activityID, booksSKU)
	n := int64(len(buyers))
	b.r.Do(t, "SET", k.Stock, itoa64(initial-n))
	b.r.Do(t, "SET", k.Sold, itoa64(n))
	b.r.Do(t, "HSET", k.Meta, "initial", itoa64(initial))
	for i, u := range buyers {
		rn := "1-1001-" + itoa64(int64(i+1))
		no := "O" + itoa64(int64(i+1))
		b.r.Do(t, "HSET", k.Users, u, rn)
		b.r.Do(t, "SADD", k.Claimed, rn)
		b.r.Do(t, "HSET", k.Results, rn, stateSuccess+"|"+u+"|"+no+"|")
		b.exec(t, `INSERT INTO seckill_order VALUES (?, ?, 'CREATED', ?, ?, 1, ?)`, rn, no, u, booksSKU, activityID)
		b.exec(t, `INSERT INTO seckill_request_log VALUES (?, ?, ?, 'SUCCESS', '', ?, 0, ?)`, rn, booksSKU, u, no, activityID)
	}
	b.exec(t, `INSERT INTO seckill_stock_snapshot VALUES (?, ?, ?, ?, ?)`, activityID, booksSKU, initial, initial-n, n)
}

func (b *booksRig) exec(t *testing.T, q string, args ...any) {
	t.Helper()
	if _, err := b.db.Exec(q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func (b *booksRig) src() Books { return Books{DB: b.db, Redis: []string{b.r.Addr}} }

func itoa64(n int64) string { return strconv.FormatInt(n, 10) }

func TestCheckBooksPassesBooksThatAddUp(t *testing.T) {
	b := newBooksRig(t)
	b.sell(t, 10, "7", "8", "9")
	vs, _, err := CheckBooks(b.src(), map[int64]int64{booksSKU: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) == 0 {
		t.Fatal("no verdicts")
	}
}

func TestCheckBooksFailsBooksThatDoNot(t *testing.T) {
	for _, tc := range []struct {
		name  string
		spoil func(t *testing.T, b *booksRig)
		want  string
	}{
		{"a unit sold twice in Redis fails the Redis ledger", func(t *testing.T, b *booksRig) {
			b.r.Do(t, "INCR", keysOf(activityID, booksSKU).Sold)
		}, vRedisLedger},
		{"an order without its unit fails the ledger", func(t *testing.T, b *booksRig) {
			b.exec(t, `INSERT INTO seckill_order VALUES ('1-1001-99', 'O99', 'CREATED', 99, ?, 1, ?)`, booksSKU, activityID)
		}, vLedger},
		{"a second live order of one buyer fails one order per user", func(t *testing.T, b *booksRig) {
			b.exec(t, `UPDATE seckill_order SET user_id = 7`)
		}, vOneOrder},
		{"a result still QUEUING fails the idle check", func(t *testing.T, b *booksRig) {
			b.r.Do(t, "HSET", keysOf(activityID, booksSKU).Results, "1-1001-1", stateQueuing+"|7||")
		}, vNoQueuing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBooksRig(t)
			b.sell(t, 10, "7", "8", "9")
			tc.spoil(t, b)
			_, _, err := CheckBooks(b.src(), map[int64]int64{booksSKU: 10})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("CheckBooks: %v, want a failure naming %q", err, tc.want)
			}
		})
	}
}

func TestCheckBooksFailsWhenRedisCannotBeRead(t *testing.T) {
	b := newBooksRig(t)
	b.sell(t, 10, "7")
	b.r.Do(t, "SET", keysOf(activityID, booksSKU).Users, "not a hash")
	if _, _, err := CheckBooks(b.src(), map[int64]int64{booksSKU: 10}); err == nil || !strings.Contains(err.Error(), "read the books") {
		t.Fatalf("CheckBooks over a users key of the wrong type: %v, want a read error", err)
	}
}

package store

import (
	"context"
	"database/sql"
	"math/bits"
	"sync"
)

// A shape is a statement over a number of rows (or of values, for an IN
// list). The batch writes run each shape only at power-of-two sizes up to
// chunk, so a handful of statements serve every batch: each is prepared
// once per connection and then only bound and run. Parsing a fresh
// multi-row statement of thousands of placeholders for every batch cost
// SQLite more than running it (measured by store/bench_test.go).
type shape struct {
	per int                            // placeholders per row
	sql func(d *dialect, n int) string // the statement over n rows
}

type stmtKey struct {
	sh *shape
	n  int
}

// stmtCache holds the prepared statements of the batch shapes. Safe for
// concurrent use; a lookup never waits for a prepare.
type stmtCache struct {
	mu sync.Mutex
	m  map[stmtKey]*sql.Stmt
}

func (c *stmtCache) get(k stmtKey) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[k]
}

// closeAll closes the prepared statements.
func (c *stmtCache) closeAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, st := range c.m {
		st.Close()
		delete(c.m, k)
	}
}

// rowsOf is the size of the next statement for n rows: the largest power
// of two not above n or chunk.
func rowsOf(n int) int {
	return min(chunk, 1<<(bits.Len(uint(n))-1))
}

// prepare prepares sh at every power-of-two size up to rows (and chunk)
// that is not prepared yet. It must run outside a transaction: SQLite's
// only writer connection would wait for itself. A failure only costs
// speed (txStmt then prepares inside the transaction), so it is ignored.
func (s *sqlStore) prepare(ctx context.Context, sh *shape, rows int) {
	for n := 1; n <= rows && n <= chunk; n <<= 1 {
		k := stmtKey{sh, n}
		if s.stmts.get(k) != nil {
			continue
		}
		st, err := s.w.PrepareContext(ctx, sh.sql(s.d, n))
		if err != nil {
			return
		}
		s.stmts.mu.Lock()
		if s.stmts.m == nil {
			s.stmts.m = map[stmtKey]*sql.Stmt{}
		}
		if s.stmts.m[k] == nil {
			s.stmts.m[k], st = st, nil
		}
		s.stmts.mu.Unlock()
		if st != nil {
			st.Close()
		}
	}
}

// txStmt returns sh over n rows as a statement of tx: the prepared one
// (database/sql reuses it on the transaction's connection), or one
// prepared for this transaction alone.
func (s *sqlStore) txStmt(ctx context.Context, tx *sql.Tx, sh *shape, n int) (*sql.Stmt, error) {
	if st := s.stmts.get(stmtKey{sh, n}); st != nil {
		return tx.StmtContext(ctx, st), nil
	}
	return tx.PrepareContext(ctx, sh.sql(s.d, n))
}

// execRows runs sh over the rows in args (sh.per values each) and returns
// the rows affected.
func (s *sqlStore) execRows(ctx context.Context, tx *sql.Tx, sh *shape, args []any) (int64, error) {
	var total int64
	for len(args) > 0 {
		n := rowsOf(len(args) / sh.per)
		st, err := s.txStmt(ctx, tx, sh, n)
		if err != nil {
			return total, err
		}
		res, err := st.ExecContext(ctx, args[:n*sh.per]...)
		if err != nil {
			return total, err
		}
		c, err := res.RowsAffected()
		if err != nil {
			return total, err
		}
		total += c
		args = args[n*sh.per:]
	}
	return total, nil
}

package chaos

import (
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// The checker's ledger half for other rigs (bench/soak, a long run that
// has no per-ticket record of its crowd): the books a finished sale left in
// Redis and in the store, judged by the same verdicts as every scenario.

// Verdict is one invariant's outcome: its name, whether it held, and what
// was counted.
type Verdict = verdict

// Books names where a sale's books are: the store's database (MariaDB or
// the SQLite file of `seckill dev`), the default Redis as the processes
// address it, and the redis-server of each SKU that lives elsewhere (a
// hot shard). The sale is activity 1 (activityID), as in every scenario.
type Books struct {
	DB     *sql.DB
	Redis  []string         // the default Redis' addresses
	Shards map[int64]string // SKU -> its redis-server when not the default
	// Sweeper says the sale runs the orphan sweeper with a grace short
	// enough to have released every occupancy without an order by the
	// time the books are checked; otherwise such occupancies are noted.
	Sweeper bool
}

// CheckBooks reads the books of skus (SKU -> its initial stock, restocks
// included) and judges them: per SKU, orders + live occupancies + Redis
// stock == initial, Redis stock + sold == initial, the snapshot agrees,
// at most one live order per user; and, the sale being quiet, no result
// still QUEUING and no request-log story left open. It returns every
// verdict and the notes; the error is one naming the verdicts that failed,
// or a read that failed.
func CheckBooks(src Books, skus map[int64]int64) ([]Verdict, []string, error) {
	if src.DB == nil || len(src.Redis) == 0 {
		return nil, nil, errors.New("chaos: CheckBooks needs the store and the default Redis")
	}
	s := &System{db: src.DB, defaultAddrs: src.Redis, skuShard: src.Shards}
	b, err := s.readBooks(skus)
	if err != nil {
		return nil, nil, fmt.Errorf("read the books: %w", err)
	}
	rep := &report{Stock: map[int64]int64{}}
	judgeLedger(rep, b, expectations{SKUs: skus, Sweeper: src.Sweeper})
	judgeIdle(rep, b, &Run{})
	if f := rep.failed(); len(f) > 0 {
		return rep.Verdicts, rep.Notes, fmt.Errorf("the books do not add up: %s", strings.Join(f, "; "))
	}
	return rep.Verdicts, rep.Notes, nil
}

// AwaitBooks is CheckBooks until the books add up or timeout passes (the
// consumer may still be writing the last orders when the crowd stops); it
// returns the last check's outcome.
func AwaitBooks(src Books, skus map[int64]int64, timeout time.Duration) ([]Verdict, []string, error) {
	deadline := time.Now().Add(timeout)
	for {
		vs, notes, err := CheckBooks(src, skus)
		if err == nil || time.Now().After(deadline) {
			return vs, notes, err
		}
		time.Sleep(500 * time.Millisecond)
	}
}

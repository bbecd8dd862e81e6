package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// A ticket's story as SaveBatch records it: not as rows of
// seckill_request_event but as columns of the ticket's request-log row,
// written by the one upsert SaveBatch makes anyway. Of the steps a
// consumer's batch proves, STOCK_OCCUPIED is the row's created_ms,
// MQ_QUEUED its queued_ms (when the engine built the message), and the
// batch's decision (ORDER_CREATED, then SUCCESS when delivered; or FAILED)
// is decided at decided_ms, the last of those steps carrying
// decided_remark. The readers of a history (RequestEvents,
// RequestHistories) tell these steps with the event rows, in time order,
// so a buyer's story reads as before; the event table keeps the steps
// that come from elsewhere (the engine's compensation, dead letters,
// payment, closing, releases). One row a ticket instead of five.

// storyColumns are the request-log columns of a batch's story; a row without
// them (queued_ms 0) has its whole history in seckill_request_event.
const storyColumns = `, queued_ms, decided_ms, decided, decided_remark`

const storyInsertCols = logInsertCols + 4

// storyUpsertSQL is the request log's upsert with the story columns: a
// row written before (the engine's COMPENSATING) gets them as well.
var storyUpsertSQL = shape{per: storyInsertCols, sql: func(d *dialect, n int) string {
	return `INSERT INTO seckill_request_log (` + logColumns + storyColumns + `) VALUES ` +
		marks(n, storyInsertCols) + d.logUpsert + d.storyUpsert
}}

// migrateStory adds the story columns to a request log made before them.
// It runs at every start.
func (s *sqlStore) migrateStory(ctx context.Context) error {
	for _, c := range []struct{ name, sqlite, mysql string }{
		{"queued_ms", "INTEGER NOT NULL DEFAULT 0", "BIGINT NOT NULL DEFAULT 0"},
		{"decided_ms", "INTEGER NOT NULL DEFAULT 0", "BIGINT NOT NULL DEFAULT 0"},
		{"decided", "TEXT NOT NULL DEFAULT ''", "VARCHAR(64) NOT NULL DEFAULT ''"},
		{"decided_remark", "TEXT NOT NULL DEFAULT ''", "VARCHAR(255) NOT NULL DEFAULT ''"},
	} {
		if err := s.addColumn(ctx, "seckill_request_log", c.name, c.sqlite, c.mysql); err != nil {
			return err
		}
	}
	return nil
}

// story is one request-log row's story columns.
type story struct {
	requestNo                   string
	created, queued, decided    int64
	decidedSteps, decidedRemark string
}

// events are the steps the story tells, oldest first; none for a row
// SaveBatch did not write.
func (st *story) events() []Event {
	if st.queued == 0 {
		return nil
	}
	out := make([]Event, 0, 4)
	out = append(out,
		Event{RequestNo: st.requestNo, Status: StatusStockOccupied, At: time.UnixMilli(st.created)},
		Event{RequestNo: st.requestNo, Status: StatusMQQueued, At: time.UnixMilli(st.queued)})
	steps := strings.Fields(st.decidedSteps)
	for i, s := range steps {
		e := Event{RequestNo: st.requestNo, Status: s, At: time.UnixMilli(st.decided)}
		if i == len(steps)-1 {
			e.Remark = st.decidedRemark
		}
		out = append(out, e)
	}
	return out
}

// tell merges a story's steps into evs (the event rows, oldest first):
// in time order; among equal times the steps that come before stock is
// taken (TOKEN_VERIFIED, RISK_PASSED: the edge's, recorded as event rows)
// first, then the story's steps, then the other event rows (the steps
// recorded after a batch, payment or closing, may share its millisecond;
// the batch's own steps were written in its transaction).
func tell(st []Event, evs []Event) []Event {
	if len(st) == 0 {
		return evs
	}
	out := append(st, evs...)
	slices.SortStableFunc(out, func(a, b Event) int {
		if c := a.At.Compare(b.At); c != 0 {
			return c
		}
		return beforeStock(b.Status) - beforeStock(a.Status)
	})
	return out
}

// beforeStock ranks the steps of a ticket before its stock is taken, in
// the state machine's order (DESIGN §3); 0 for every other step.
func beforeStock(status string) int {
	switch status {
	case StatusTokenVerified:
		return 2
	case StatusRiskPassed:
		return 1
	}
	return 0
}

const storySelect = `SELECT request_no, created_ms, queued_ms, decided_ms, decided, decided_remark
	FROM seckill_request_log WHERE request_no `

// stories reads the story columns of the request-log rows of rns.
func (s *sqlStore) stories(ctx context.Context, rns []any) (map[string][]Event, error) {
	q := storySelect + `= ?`
	if len(rns) > 1 {
		q = storySelect + `IN (` + marks(len(rns), 1) + `)`
	}
	rows, err := s.r.QueryContext(ctx, q, rns...)
	if err != nil {
		return nil, fmt.Errorf("stories: %w", err)
	}
	defer rows.Close()
	out := make(map[string][]Event, len(rns))
	for rows.Next() {
		var st story
		if err := rows.Scan(&st.requestNo, &st.created, &st.queued, &st.decided, &st.decidedSteps,
			&st.decidedRemark); err != nil {
			return nil, fmt.Errorf("stories: %w", err)
		}
		if evs := st.events(); evs != nil {
			out[st.requestNo] = evs
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("stories: %w", err)
	}
	return out, nil
}

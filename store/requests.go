package store

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// A buyer's story for support: every attempt and ticket of theirs in the
// request log, newest first, a page at a time; and the edge's free
// rejections, counted per minute.

// RequestCursor is where a page of a buyer's requests ends: the last
// entry's creation time (unix ms) and row id. The next page starts
// strictly after it in the order (created, id) descending. The zero cursor
// starts at the newest.
type RequestCursor struct {
	CreatedMs int64
	ID        int64
}

// IsZero reports whether c is the start.
func (c RequestCursor) IsZero() bool { return c == RequestCursor{} }

// String is the cursor as the admin API passes it ("createdMs-id"; empty
// for the start).
func (c RequestCursor) String() string {
	if c.IsZero() {
		return ""
	}
	return fmt.Sprintf("%d-%d", c.CreatedMs, c.ID)
}

// ParseRequestCursor reads String's form; empty is the start.
func ParseRequestCursor(s string) (RequestCursor, error) {
	var c RequestCursor
	if s == "" {
		return c, nil
	}
	ms, id, _ := strings.Cut(s, "-")
	var err1, err2 error
	c.CreatedMs, err1 = strconv.ParseInt(ms, 10, 64)
	c.ID, err2 = strconv.ParseInt(id, 10, 64)
	if err1 != nil || err2 != nil || c.CreatedMs <= 0 || c.ID <= 0 {
		return RequestCursor{}, fmt.Errorf("cursor %q: want createdMs-id", s)
	}
	return c, nil
}

// userRequestsQuery reads by the index (user_id, activity_id, created_ms):
// with an activity, an index range read backwards; without, the buyer's
// rows of every activity, sorted.
const userRequestsSelect = `SELECT id, ` + logColumns + ` FROM seckill_request_log WHERE user_id = ?`

func (s *sqlStore) UserRequests(ctx context.Context, user, activity int64, after RequestCursor, limit int) ([]LogEntry, RequestCursor, error) {
	if limit <= 0 {
		return nil, RequestCursor{}, nil
	}
	q, args := userRequestsSelect, []any{user}
	if activity != 0 {
		q += ` AND activity_id = ?`
		args = append(args, activity)
	}
	if !after.IsZero() {
		q += ` AND created_ms <= ? AND (created_ms < ? OR id < ?)`
		args = append(args, after.CreatedMs, after.CreatedMs, after.ID)
	}
	q += ` ORDER BY created_ms DESC, id DESC LIMIT ?`
	args = append(args, limit)
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, RequestCursor{}, fmt.Errorf("requests of user %d: %w", user, err)
	}
	defer rows.Close()
	out := make([]LogEntry, 0, min(limit, 64))
	var next RequestCursor
	for rows.Next() {
		var id int64
		e, err := scanLog(idScanner{rows, &id})
		if err != nil {
			return nil, RequestCursor{}, fmt.Errorf("requests of user %d: %w", user, err)
		}
		out = append(out, e)
		next = RequestCursor{CreatedMs: e.Created.UnixMilli(), ID: id}
	}
	if err := rows.Err(); err != nil {
		return nil, RequestCursor{}, fmt.Errorf("requests of user %d: %w", user, err)
	}
	if len(out) < limit {
		// The last page: nothing continues it.
		next = RequestCursor{}
	}
	return out, next, nil
}

// idScanner scans a leading id column into id, then the rest as asked.
type idScanner struct {
	row interface{ Scan(...any) error }
	id  *int64
}

func (s idScanner) Scan(dest ...any) error { return s.row.Scan(append([]any{s.id}, dest...)...) }

func (s *sqlStore) RequestHistories(ctx context.Context, requestNos []string) (map[string][]Event, error) {
	out := make(map[string][]Event, len(requestNos))
	for rest := requestNos; len(rest) > 0; {
		n := min(len(rest), chunk)
		args := make([]any, n)
		for i, rn := range rest[:n] {
			args[i] = rn
		}
		rows, err := s.r.QueryContext(ctx, `SELECT request_no, status, remark, created_ms FROM seckill_request_event
			WHERE request_no IN (`+marks(n, 1)+`) ORDER BY created_ms, id`, args...)
		if err != nil {
			return nil, fmt.Errorf("request histories: %w", err)
		}
		for rows.Next() {
			var (
				e  Event
				at int64
			)
			if err := rows.Scan(&e.RequestNo, &e.Status, &e.Remark, &at); err != nil {
				rows.Close()
				return nil, fmt.Errorf("request histories: %w", err)
			}
			e.At = time.UnixMilli(at)
			out[e.RequestNo] = append(out[e.RequestNo], e)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("request histories: %w", err)
		}
		st, err := s.stories(ctx, args)
		if err != nil {
			return nil, fmt.Errorf("request histories: %w", err)
		}
		for rn, evs := range st {
			out[rn] = tell(evs, out[rn])
		}
		rest = rest[n:]
	}
	return out, nil
}

// RejectCount is a number of the edge's free rejections of one activity,
// SKU and reason within one minute (seckill_reject_minute). Activity and
// SKU are 0 where the edge refused before it knew them (a per-IP limit).
type RejectCount struct {
	ActivityID int64     `json:"activityId"`
	SKUID      int64     `json:"skuId"`
	Reason     string    `json:"reason"`
	Minute     time.Time `json:"minute"` // the minute's start
	N          int64     `json:"n"`
}

const rejectCols = 5

var rejectUpsertSQL = shape{per: rejectCols, sql: func(d *dialect, n int) string {
	return `INSERT INTO seckill_reject_minute (activity_id, sku_id, reason, minute_ms, n) VALUES ` +
		marks(n, rejectCols) + d.rejectUpsert
}}

func (s *sqlStore) CountRejections(ctx context.Context, cs []RejectCount) error {
	if len(cs) == 0 {
		return nil
	}
	args := make([]any, 0, len(cs)*rejectCols)
	for _, c := range cs {
		args = append(args, c.ActivityID, c.SKUID, cut(c.Reason, 32), c.Minute.Truncate(time.Minute).UnixMilli(), c.N)
	}
	if err := s.inTx(ctx, func(tx *sql.Tx) error {
		_, err := s.execRows(ctx, tx, &rejectUpsertSQL, args)
		return err
	}); err != nil {
		return fmt.Errorf("count %d rejections: %w", len(cs), err)
	}
	return nil
}

func (s *sqlStore) Rejections(ctx context.Context, activity int64, since time.Time) ([]RejectCount, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT activity_id, sku_id, reason, minute_ms, n FROM seckill_reject_minute
		WHERE activity_id = ? AND minute_ms >= ? ORDER BY minute_ms, sku_id, reason`,
		activity, since.Truncate(time.Minute).UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("rejections of activity %d: %w", activity, err)
	}
	defer rows.Close()
	var out []RejectCount
	for rows.Next() {
		var (
			c  RejectCount
			ms int64
		)
		if err := rows.Scan(&c.ActivityID, &c.SKUID, &c.Reason, &ms, &c.N); err != nil {
			return nil, fmt.Errorf("rejections of activity %d: %w", activity, err)
		}
		c.Minute = time.UnixMilli(ms)
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("rejections of activity %d: %w", activity, err)
	}
	return out, nil
}

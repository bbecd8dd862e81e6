package store

import (
	"context"
	"database/sql"
	"fmt"
)

func (s *sqlStore) PutRouteSwitch(ctx context.Context, name string, open bool) error {
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM seckill_route_switch WHERE name = ?`, name); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO seckill_route_switch (name, open, updated_ms) VALUES (?, ?, ?)`,
			name, boolInt(open), s.nowMs())
		return err
	})
	if err != nil {
		return fmt.Errorf("put route switch %s: %w", name, err)
	}
	return nil
}

func (s *sqlStore) RouteSwitches(ctx context.Context) (map[string]bool, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT name, open FROM seckill_route_switch`)
	if err != nil {
		return nil, fmt.Errorf("route switches: %w", err)
	}
	defer rows.Close()
	m := map[string]bool{}
	for rows.Next() {
		var (
			name string
			open int
		)
		if err := rows.Scan(&name, &open); err != nil {
			return nil, fmt.Errorf("route switches: %w", err)
		}
		m[name] = open != 0
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("route switches: %w", err)
	}
	return m, nil
}

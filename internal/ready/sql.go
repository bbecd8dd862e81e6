package ready

import (
	"context"
	"database/sql"
	"fmt"
)

// SQL checks that the database at dsn accepts a connection and answers
// SELECT 1. driver must be registered with database/sql (the orders store
// registers "mysql" and "sqlite"). The DSN is never part of the error.
func SQL(driver, dsn string) func(context.Context) error {
	return func(ctx context.Context) error {
		db, err := sql.Open(driver, dsn)
		if err != nil {
			return fmt.Errorf("%s: %w", driver, err)
		}
		defer db.Close()
		var one int
		if err := db.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
			return fmt.Errorf("%s: %w", driver, err)
		}
		return nil
	}
}

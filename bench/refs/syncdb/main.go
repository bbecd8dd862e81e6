// Command syncdb is the bench harness's baseline: the seed's synchronous
// purchase path, served on the same route. Every POST
// /api/v1/flash-sale/order runs one MariaDB transaction:
//
//	UPDATE sku_stock SET available_stock = available_stock - 1
//	 WHERE sku_id = ? AND available_stock > 0;
//	INSERT INTO sync_order (order_no, sku_id, user_id, created_ms) VALUES (…);
//
// and answers 200 (ordered), 410 (no row updated: sold out), 409 (the
// user already has an order: duplicate key) or 503 (database error).
//
//	syncdb -listen 127.0.0.1:18082 -dsn 'root@tcp(127.0.0.1:3306)/' -stock 100000000
//
// At start it creates database seckill_sync, its two tables and SKU 1 with
// -stock units (dropping what an earlier run left).
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"log"
	"strconv"
	"sync/atomic"
	"time"

	mysql "github.com/go-sql-driver/mysql"
	"github.com/valyala/fasthttp"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:18082", "listen address (loopback)")
	dsn := flag.String("dsn", "root@tcp(127.0.0.1:3306)/", "MariaDB server (no database)")
	stock := flag.Int64("stock", 100_000_000, "units of SKU 1")
	conns := flag.Int("conns", 256, "connection pool size")
	flag.Parse()

	ctx := context.Background()
	admin, err := sql.Open("mysql", *dsn)
	if err != nil {
		log.Fatal(err)
	}
	for _, q := range []string{
		"DROP DATABASE IF EXISTS seckill_sync",
		"CREATE DATABASE seckill_sync",
		`CREATE TABLE seckill_sync.sku_stock (sku_id BIGINT NOT NULL PRIMARY KEY,
			available_stock BIGINT NOT NULL) ENGINE=InnoDB`,
		`CREATE TABLE seckill_sync.sync_order (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
			order_no VARCHAR(64) NOT NULL, sku_id BIGINT NOT NULL, user_id BIGINT NOT NULL,
			created_ms BIGINT NOT NULL, UNIQUE KEY uk_order_no (order_no),
			UNIQUE KEY uk_sku_user (sku_id, user_id)) ENGINE=InnoDB`,
		"INSERT INTO seckill_sync.sku_stock VALUES (1, " + strconv.FormatInt(*stock, 10) + ")",
	} {
		if _, err := admin.ExecContext(ctx, q); err != nil {
			log.Fatalf("%s: %v", q, err)
		}
	}
	admin.Close()
	db, err := sql.Open("mysql", *dsn+"seckill_sync")
	if err != nil {
		log.Fatal(err)
	}
	db.SetMaxOpenConns(*conns)
	db.SetMaxIdleConns(*conns)
	db.SetConnMaxIdleTime(time.Minute)

	var seq atomic.Int64
	ct := []byte("application/json")
	srv := &fasthttp.Server{
		Name:        "syncdb",
		Concurrency: 256 * 1024,
		Handler: func(ctx *fasthttp.RequestCtx) {
			ctx.SetContentTypeBytes(ct)
			user, err := strconv.ParseInt(string(ctx.Request.Header.Peek("X-User-Id")), 10, 64)
			if err != nil {
				ctx.SetStatusCode(fasthttp.StatusBadRequest)
				return
			}
			orderNo := "s" + strconv.FormatInt(seq.Add(1), 10)
			status := buy(ctx, db, user, orderNo)
			ctx.SetStatusCode(status)
			switch status {
			case fasthttp.StatusOK:
				ctx.SetBodyString(`{"code":"SUCCESS","orderNo":"` + orderNo + `"}`)
			case fasthttp.StatusGone:
				ctx.SetBodyString(`{"code":"SOLD_OUT"}`)
			case fasthttp.StatusConflict:
				ctx.SetBodyString(`{"code":"DUPLICATE"}`)
			default:
				ctx.SetBodyString(`{"code":"BUSY"}`)
			}
		},
	}
	log.Fatal(srv.ListenAndServe(*listen))
}

// buy is the seed's synchronous purchase: one transaction per request.
func buy(ctx context.Context, db *sql.DB, user int64, orderNo string) int {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fasthttp.StatusServiceUnavailable
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, "UPDATE sku_stock SET available_stock = available_stock - 1 WHERE sku_id = 1 AND available_stock > 0")
	if err != nil {
		return fasthttp.StatusServiceUnavailable
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fasthttp.StatusGone
	}
	_, err = tx.ExecContext(ctx, "INSERT INTO sync_order (order_no, sku_id, user_id, created_ms) VALUES (?, 1, ?, ?)",
		orderNo, user, time.Now().UnixMilli())
	if err != nil {
		var me *mysql.MySQLError
		if errors.As(err, &me) && me.Number == 1062 {
			return fasthttp.StatusConflict
		}
		return fasthttp.StatusServiceUnavailable
	}
	if tx.Commit() != nil {
		return fasthttp.StatusServiceUnavailable
	}
	return fasthttp.StatusOK
}

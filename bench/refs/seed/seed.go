// Package seed holds seed 001 §9.2's occupy script exactly as the article
// prints it — GET status, SISMEMBER, GET stock, DECR, SADD, EXPIRE on three
// keys of one Redis — and its keys: the yardstick the bench measures the
// accept path against (bench/refs/evalsha -script seed, bench/scaling).
package seed

import (
	_ "embed"
	"strconv"
)

// Script is seed.lua. KEYS: Stock, Users, Status; ARGV[1] the userId.
// Returns 0 not started or closed, 1 sold out, 2 duplicate, 3 occupied.
//
//go:embed seed.lua
var Script string

// The script's keys for activity 1, SKU 1: no hash tags, the article's
// shape.
const (
	Stock  = "seckill:stock:1:1"
	Users  = "seckill:users:1:1"
	Status = "seckill:status:1"
)

// Codes of Script.
const (
	NotOpen   = 0
	SoldOut   = 1
	Duplicate = 2
	Occupied  = 3
)

// Preheat is the commands that open the sale with units of stock and no
// buyer: DEL of the three keys, SET status ONLINE, SET stock.
func Preheat(units int64) [][]string {
	return [][]string{
		{"DEL", Stock, Users, Status},
		{"SET", Status, "ONLINE"},
		{"SET", Stock, strconv.FormatInt(units, 10)},
	}
}

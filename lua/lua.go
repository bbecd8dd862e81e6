// Package lua embeds the Redis scripts of the stock ledger (package stock)
// and the edges' heartbeat (package edge).
// Each script's header lists its KEYS, ARGV and return codes; callers load
// them once and run them by SHA (rueidis.NewLuaScript falls back to EVAL on NOSCRIPT).
package lua

import _ "embed"

// OccupyBatch takes stock for n ≥ 1 buyers of one SKU in one call: the one
// definition of the occupy rules (a single buyer is a batch of one). See
// occupy_batch.lua.
//
//go:embed occupy_batch.lua
var OccupyBatch string

// ReleaseBatch gives the stock of n ≥ 1 tickets of one SKU back,
// idempotently and bound to each ticket, in one call: the one definition
// of the release rule. See release_batch.lua.
//
//go:embed release_batch.lua
var ReleaseBatch string

// ClaimBatch marks n ≥ 1 tickets of one SKU as becoming orders in one call:
// the one definition of the claim rule. See claim_batch.lua.
//
//go:embed claim_batch.lua
var ClaimBatch string

// Restock adds units to a live SKU: see restock.lua.
//
//go:embed restock.lua
var Restock string

// EdgeHeartbeat announces an edge and counts the live ones (the admission
// gate's share): see edge_heartbeat.lua.
//
//go:embed edge_heartbeat.lua
var EdgeHeartbeat string

// TransferDebit and TransferCredit move units between two buckets of one
// SKU: the debit recorded under the transfer's id on the source, the credit
// applied once per id on the destination. See transfer_debit.lua and
// transfer_credit.lua.
//
//go:embed transfer_debit.lua
var TransferDebit string

// TransferCredit: see TransferDebit.
//
//go:embed transfer_credit.lua
var TransferCredit string

// BucketRead reads one bucket's remaining units and transfer totals in one
// atomic step. See bucket_read.lua.
//
//go:embed bucket_read.lua
var BucketRead string

// BucketState reads what a rebuild of a SKU's lost buckets needs of one
// bucket in one atomic step. See bucket_state.lua.
//
//go:embed bucket_state.lua
var BucketState string

// TransferTrim drops the per-id entries of a bucket's finished transfers
// once they are old. See transfer_trim.lua.
//
//go:embed transfer_trim.lua
var TransferTrim string

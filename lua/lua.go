// Package lua embeds the Redis scripts of the stock ledger (package stock).
// Each script's header lists its KEYS, ARGV and return codes; callers load
// them once and run them by SHA (rueidis.NewLuaScript falls back to EVAL on NOSCRIPT).
package lua

import _ "embed"

// Occupy takes stock for one buyer: see occupy.lua.
//
//go:embed occupy.lua
var Occupy string

// Release gives one ticket's stock back, idempotently: see release.lua.
//
//go:embed release.lua
var Release string

// Claim marks a ticket as becoming an order: see claim.lua.
//
//go:embed claim.lua
var Claim string

// Restock adds units to a live SKU: see restock.lua.
//
//go:embed restock.lua
var Restock string

// OccupyBatch takes stock for n buyers of one SKU in one call, with the
// answers occupy.lua would give one after another: see occupy_batch.lua.
//
//go:embed occupy_batch.lua
var OccupyBatch string

// ClaimBatch marks n tickets of one SKU as becoming orders in one call: see
// claim_batch.lua.
//
//go:embed claim_batch.lua
var ClaimBatch string

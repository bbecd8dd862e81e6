package lua

import _ "embed"

// The reconciler's scripts (see package reconcile).

// Ledger reads one SKU's counters atomically: see ledger.lua.
//
//go:embed ledger.lua
var Ledger string

// Restore gives live orders back lost user records: see restore.lua.
//
//go:embed restore.lua
var Restore string

// Settle aligns sold with the records of a one-unit SKU: see settle.lua.
//
//go:embed settle.lua
var Settle string

// Rebuild writes a lost SKU back from the database: see rebuild.lua.
//
//go:embed rebuild.lua
var Rebuild string

// Reindex puts unclaimed records the pending journal misses in it: see
// reindex.lua.
//
//go:embed reindex.lua
var Reindex string

// PendingPage reads one page of the pending journal for the orphan sweeper,
// removing the entries it finds spent: see pending_page.lua.
//
//go:embed pending_page.lua
var PendingPage string

package admin

// The bodies the admin API's PUT and POST routes take (decoded strictly:
// an unknown field is 400). POST /admin/v1/activities takes a
// sale.Activity. Fields stand in the order of their JSON names, so a body
// is spelled as one from a map would be.

// StateChange is PUT /admin/v1/activities/{id}/state's body.
type StateChange struct {
	State string `json:"state"` // sale.StateOnline or sale.StateOffline
}

// RiskChange is PUT /admin/v1/activities/{id}/risk's body.
type RiskChange struct {
	OnError string `json:"onError"` // sale.RiskAllow or sale.RiskDeny
}

// DegradeChange is PUT /admin/v1/activities/{id}/degrade's body: the
// switches named change, the others are kept; at least one is required.
type DegradeChange struct {
	Paused       *bool  `json:"paused,omitempty"`
	PollAfterMs  *int64 `json:"pollAfterMs,omitempty"` // 0..60000; 0: the edge's default
	ReservedOnly *bool  `json:"reservedOnly,omitempty"`
}

// SoldOutChange is PUT /admin/v1/skus/{sku}/soldout's body.
type SoldOutChange struct {
	// ActivityID names the activity (also ?activityId=); 0: the SKU's
	// current one.
	ActivityID int64 `json:"activityId,omitempty"`
	SoldOut    *bool `json:"soldOut"` // required
}

// RestockRequest is POST /admin/v1/skus/{sku}/restock's body.
type RestockRequest struct {
	// ActivityID names the activity (also ?activityId=); 0: the SKU's
	// current one.
	ActivityID int64 `json:"activityId,omitempty"`
	Units      int64 `json:"units"` // 1..10000000
}

// RouteChange is PUT /admin/v1/routes/{name}'s body.
type RouteChange struct {
	Open *bool `json:"open"` // required
}

// ModeChange is PUT /admin/v1/skus/{sku}/mode's body: the fields named
// change, the others are kept; at least one of Mode and Rate is required.
type ModeChange struct {
	// ActivityID names the activity (also ?activityId=); 0: the one
	// selling the SKU now.
	ActivityID int64   `json:"activityId,omitempty"`
	Mode       *string `json:"mode,omitempty"` // sale.ModeDirect or sale.ModeQueue
	Rate       *int64  `json:"rate,omitempty"` // attempts per second; 0: as fast as the shard allows
}

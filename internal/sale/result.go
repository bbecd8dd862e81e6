package sale

// Result states a buyer can read (DESIGN §4).
const (
	ResultQueuing = "QUEUING"
	ResultSuccess = "SUCCESS"
	ResultFail    = "FAIL"
)

// Failure codes recorded in a FAIL result.
const (
	FailBusy     = "BUSY"     // the order message could not be made durable
	FailReleased = "RELEASED" // the occupancy was released before an order was made
	FailSoldOut  = "SOLD_OUT" // the database had no stock left (snapshot guard)
	FailInvalid  = "INVALID"  // the message could not be processed
	FailClosed   = "CLOSED"   // the order was closed unpaid
)

// Result fields in a ticket's result hash (ResultKey).
const (
	FieldState   = "state"
	FieldOwner   = "owner"
	FieldOrderNo = "orderNo"
	FieldCode    = "code"
)

// Result is what the result endpoint answers.
type Result struct {
	State   string `json:"code"`
	Owner   int64  `json:"-"`
	OrderNo string `json:"orderNo,omitempty"`
	Code    string `json:"reason,omitempty"`
}

package sale

import (
	"strconv"
	"strings"
)

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

// A ticket's result is one field of its SKU's results hash (ResultsKey),
// the requestNo, whose value is STATE|owner|orderNo|code — e.g.
// "QUEUING|42||", "SUCCESS|42|O7-7001-385465232614494208|",
// "FAIL|42||RELEASED". None of the four holds a '|'. lua/occupy_batch.lua
// writes the QUEUING value in the same form.

// AppendResultValue appends the value of a result to dst.
func AppendResultValue(dst []byte, state string, owner int64, orderNo, code string) []byte {
	dst = append(dst, state...)
	dst = append(dst, '|')
	dst = strconv.AppendInt(dst, owner, 10)
	dst = append(dst, '|')
	dst = append(dst, orderNo...)
	dst = append(dst, '|')
	return append(dst, code...)
}

// ParseResultValue reads a value AppendResultValue wrote; ok is false for
// anything else.
func ParseResultValue(v string) (state string, owner int64, orderNo, code string, ok bool) {
	state, rest, ok1 := strings.Cut(v, "|")
	o, rest, ok2 := strings.Cut(rest, "|")
	orderNo, code, ok3 := strings.Cut(rest, "|")
	if !ok1 || !ok2 || !ok3 || state == "" || strings.Contains(code, "|") {
		return "", 0, "", "", false
	}
	owner, err := strconv.ParseInt(o, 10, 64)
	if err != nil {
		return "", 0, "", "", false
	}
	return state, owner, orderNo, code, true
}

// Result is what the result endpoint answers.
type Result struct {
	State   string `json:"code"`
	Owner   int64  `json:"-"`
	OrderNo string `json:"orderNo,omitempty"`
	Code    string `json:"reason,omitempty"`
}

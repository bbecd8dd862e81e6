package sale

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
)

// The waiting line of queue mode (SKU.Mode = ModeQueue, DESIGN §13).

// ResultWaiting is the result of a ticket whose attempt waits in its SKU's
// line: written by the edge (never over another state) once the attempt
// is durable in the attempts topic; its code is "<partition>:<offset>",
// where the attempt lies. The drainer's occupy then writes QUEUING, or a
// FAIL with the occupy's reason.
const ResultWaiting = "WAITING"

// AttemptsTopic is the default topic of attempts (engine.queue.topic),
// keyed by SKU so one partition holds a SKU's line in order.
const AttemptsTopic = "seckill.attempts"

// WaitingKey is the hash userId -> requestNo of the buyers waiting in the
// line of (activity, sku): sk:{a<activity>:s<sku>}:w, in the SKU's slot.
// The edge adds a buyer (HSETNX: one waiting ticket per buyer and SKU,
// whichever edge takes the attempt) before it produces the attempt; the
// drainer removes them once their attempt is decided.
func WaitingKey(activity, sku int64) string {
	var buf [48]byte
	return string(append(appendPrefix(buf[:0], activity, sku), 'w'))
}

// DrainedKey is the hash on the default Redis where the drainers publish
// their progress per partition of the attempts topic: field the partition,
// value "<next offset>|<attempts drained per second>|<unix ms>".
const DrainedKey = "sk:q:drained"

// AppendDrained appends a DrainedKey value to dst.
func AppendDrained(dst []byte, next int64, perSec float64, ms int64) []byte {
	dst = strconv.AppendInt(dst, next, 10)
	dst = append(dst, '|')
	dst = strconv.AppendFloat(dst, perSec, 'f', 1, 64)
	dst = append(dst, '|')
	return strconv.AppendInt(dst, ms, 10)
}

// ParseDrained reads a DrainedKey value; ok is false for anything else.
func ParseDrained(v string) (next int64, perSec float64, ms int64, ok bool) {
	a, rest, ok1 := strings.Cut(v, "|")
	b, c, ok2 := strings.Cut(rest, "|")
	if !ok1 || !ok2 {
		return 0, 0, 0, false
	}
	var err1, err2, err3 error
	next, err1 = strconv.ParseInt(a, 10, 64)
	perSec, err2 = strconv.ParseFloat(b, 64)
	ms, err3 = strconv.ParseInt(c, 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || next < 0 || !(perSec >= 0) {
		return 0, 0, 0, false
	}
	return next, perSec, ms, true
}

// AttemptSigning derives the keys attempts are signed with from the order
// signing keys: the same ids, each secret HMAC-SHA256(secret, "seckill
// attempt v1") in hex. An attempt is an order message in form (Message)
// but not in meaning — it holds no stock —, so a signed attempt must never
// verify as an order, nor an order as an attempt.
func AttemptSigning(c SigningConfig) SigningConfig {
	out := SigningConfig{Keys: append(c.Keys[:0:0], c.Keys...)}
	for i := range out.Keys {
		m := hmac.New(sha256.New, []byte(out.Keys[i].Secret))
		m.Write([]byte("seckill attempt v1"))
		out.Keys[i].Secret = hex.EncodeToString(m.Sum(nil))
	}
	return out
}

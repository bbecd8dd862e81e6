package chaos

import "strconv"

// The names the checker reads, spelled here from the documentation — not
// taken from the production helpers, so a product change that renames a key
// or a table without the documentation shows up as a failing check instead
// of a checker that silently follows the code it checks.
//
//   - Redis (DESIGN §5, docs/operations-ledger.md "Who writes what"): every
//     key of one SKU carries the hash tag {a<activity>:s<sku>}, e.g.
//     sk:{a1:s1001}:stock; …:users is the hash userId → requestNo (the proof
//     of occupancy), …:sold the units occupied or ordered, …:meta a hash
//     with "initial", …:claimed the set of requestNos the consumer claimed.
//     A ticket's result is the requestNo's field of the SKU's results hash
//     sk:{a<activity>:s<sku>}:r on the shard of its SKU (the requestNo
//     "<activity>-<sku>-<id>" names it; README "Numbers"), its value
//     STATE|owner|orderNo|code (DESIGN §5).
//   - Database (README "The life of a ticket", docs/operations-ledger.md):
//     seckill_order, seckill_request_log, seckill_stock_snapshot.
//   - Kafka (DESIGN §6, §13): the orders topic seckill.orders; queue mode's
//     attempts topic seckill.attempts.

// skuKeys are the Redis keys of one SKU of one activity.
// Results is the results hash of the SKU's tickets, sk:{a<activity>:s<sku>}:r,
// requestNo -> STATE|owner|orderNo|code; a ticket with no final result that
// its buyer's record in Users names reads QUEUING.
type skuKeys struct {
	Meta, Stock, Users, Sold, Claimed, Results string
}

func keysOf(activity, sku int64) skuKeys {
	p := "sk:{a" + strconv.FormatInt(activity, 10) + ":s" + strconv.FormatInt(sku, 10) + "}:"
	return skuKeys{Meta: p + "meta", Stock: p + "stock", Users: p + "users", Sold: p + "sold", Claimed: p + "claimed",
		Results: p + "r"}
}

// The parts of a result (the four of its value, named as the checker keeps
// them) and their values (README "HTTP API": QUEUING, SUCCESS + orderNo,
// FAIL + reason; docs/operations-ledger.md lists the failure codes).
const (
	fieldState   = "state"
	fieldOwner   = "owner"
	fieldOrderNo = "orderNo"
	fieldCode    = "code"

	stateWaiting = "WAITING" // queue mode: in line, not yet drained (DESIGN §13)
	stateQueuing = "QUEUING"
	stateSuccess = "SUCCESS"
	stateFail    = "FAIL"

	failReleased = "RELEASED" // released before an order was made
	failSoldOut  = "SOLD_OUT" // the database snapshot had no stock
)

// ordersTopic is the Kafka topic of order messages.
const ordersTopic = "seckill.orders"

// attemptsTopic is queue mode's waiting lines (DESIGN §13): one record per
// attempt taken, its value the order message's JSON (requestNo, userId,
// skuId, …) signed with the attempt keys.
const attemptsTopic = "seckill.attempts"

// Order statuses (README "Payment"): an order holds stock unless CLOSED.
const orderClosed = "CLOSED"

// Request-log states that end a ticket's story (DESIGN §3: SUCCESS, or
// REJECTED — never held stock — or FAILED — held stock, then released).
// Every other state (STOCK_OCCUPIED, MQ_QUEUED, ORDER_CREATED,
// COMPENSATING, …) is a ticket still on its way.
var finalLogStates = map[string]bool{"SUCCESS": true, "FAILED": true, "REJECTED": true}

package sale

import "strconv"

// Redis key layout (DESIGN §5). Every key of one SKU carries the hash tag
// {a<activity>:s<sku>} so that one script touches one cluster slot.

// SKUKeys are the keys of one SKU of one activity, all in one slot.
type SKUKeys struct {
	Meta  string // hash: status, start_ms, end_ms, limit, price, initial, activity, rebuy, soldout
	Stock string // integer: remaining stock
	Users string // hash: userId -> requestNo (proof of occupancy)
	Sold  string // integer: units occupied or ordered
	Claim string // set: requestNos the consumer has claimed for an order
	// Closed is a hash userId -> requestNo of the buyer's order closed
	// unpaid (the latest). Written by every close; read by occupy only
	// where meta "rebuy" is "0" (the activity forbids buying again after a
	// close).
	Closed string
	// Qty is a hash requestNo -> units of every record (Users) of a SKU
	// that sells more than one unit per ticket (meta limit > 1), so that a
	// release, the orphan sweeper and the reconciler give back exactly what
	// a ticket took even when its message is lost.
	Qty string
	// Pending is a sorted set "userId:requestNo" -> accept time (Redis
	// server ms) of every record (Users) not claimed: written by occupy,
	// removed by claim and release in the same scripts, so the orphan
	// sweeper reads only the tickets older than its grace period instead
	// of every holder of the SKU.
	Pending string
	// Results is a hash requestNo -> result of the SKU's tickets
	// (ResultValue: "STATE|owner|orderNo|code"), one field per ticket. It
	// lives in the SKU's slot, on the shard that holds the SKU, so the
	// occupy script writes a batch's QUEUING results in the same call that
	// takes the stock (one HSET for the batch), and the consumer a
	// batch's SUCCESS and FAIL with one HSET per SKU. Every write sets the
	// hash's TTL (engine.result_ttl): the results of a SKU are kept until
	// that long after its last result was written.
	Results string
	// Rate is the prefix of the user × SKU window's hashes: Rate + the
	// window's number (unix ms / edge.rate.user_sku_window's ms), a hash
	// userId -> attempts in that window (edge.rate.user_sku_limit), counted
	// by the occupy script; each expires when its window ends.
	Rate string
}

// KeysFor builds the keys of (activity, sku).
func KeysFor(activity, sku int64) SKUKeys {
	var buf [48]byte
	p := string(appendPrefix(buf[:0], activity, sku))
	return SKUKeys{Meta: p + "meta", Stock: p + "stock", Users: p + "users", Sold: p + "sold", Claim: p + "claimed", Closed: p + "closed", Qty: p + "qty", Pending: p + "pending",
		Results: p + "r", Rate: p + "rl:"}
}

// ResultsKey is the key of the results hash of (activity, sku):
// sk:{a<activity>:s<sku>}:r, on the shard that holds the SKU; a ticket's
// result is its requestNo's field. ParseRequestNo reads activity and sku
// back from the ticket number.
func ResultsKey(activity, sku int64) string {
	var buf [48]byte
	return string(append(appendPrefix(buf[:0], activity, sku), 'r'))
}

// appendPrefix appends the prefix every key of (activity, sku) starts
// with, sk:{a<activity>:s<sku>}:, to b. The result and rate keys are built
// once per ticket or batch: one allocation each, not KeysFor's eleven.
func appendPrefix(b []byte, activity, sku int64) []byte {
	b = append(b, "sk:{a"...)
	b = strconv.AppendInt(b, activity, 10)
	b = append(b, ":s"...)
	b = strconv.AppendInt(b, sku, 10)
	return append(b, "}:"...)
}

// RateKey is the key of the user × SKU window's hash of (activity, sku)
// for window number bucket: sk:{a<activity>:s<sku>}:rl:<bucket>, in the
// SKU's slot; its fields are userIds, its values their attempts.
func RateKey(activity, sku, bucket int64) string {
	var buf [72]byte
	b := appendPrefix(buf[:0], activity, sku)
	return string(strconv.AppendInt(append(b, "rl:"...), bucket, 10))
}

// ActivityKey holds an activity's JSON on the default Redis (the catalog the
// edges read).
func ActivityKey(id int64) string { return "sk:act:" + strconv.FormatInt(id, 10) }

// ActivitiesKey is the set of activity ids in the catalog.
const ActivitiesKey = "sk:acts"

// EventsChannel is the pub/sub channel every edge subscribes to.
const EventsChannel = "sk:events"

package sale

import (
	"fmt"
	"strconv"
	"strings"
)

// MaxBuckets bounds SKU.Buckets: a ticket number names its bucket in at
// most two digits.
const MaxBuckets = 64

// NoBucket is the bucket of a SKU that is not split: its keys are the
// SKU's own (KeysFor), its ticket numbers name no bucket.
const NoBucket = -1

// BucketCount is the number of the SKU's sub-ledgers: 1 for a SKU that is
// not split.
func (k *SKU) BucketCount() int { return max(k.Buckets, 1) }

// Split reports whether the SKU's stock is split into buckets.
func (k *SKU) Split() bool { return k.Buckets > 1 }

// BucketIndexes lists the SKU's buckets: [NoBucket] when it is not split,
// else 0..Buckets-1.
func (k *SKU) BucketIndexes() []int {
	if !k.Split() {
		return []int{NoBucket}
	}
	out := make([]int, k.Buckets)
	for i := range out {
		out[i] = i
	}
	return out
}

// BucketOf is the bucket a buyer's record lives in: NoBucket for a SKU that
// is not split, else a mix of the user id mod Buckets, so a buyer's
// duplicate, limit and window are judged in exactly one bucket and
// consecutive ids spread evenly.
func (k *SKU) BucketOf(user int64) int {
	if !k.Split() {
		return NoBucket
	}
	// splitmix64's finaliser: every input bit moves every output bit.
	x := uint64(user)
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return int(x % uint64(k.Buckets))
}

// BucketShare is bucket b's part of n units split as evenly as possible:
// the first n mod Buckets buckets get one more. For a SKU that is not
// split it is n.
func (k *SKU) BucketShare(n int64, b int) int64 {
	if !k.Split() {
		return n
	}
	q, r := n/int64(k.Buckets), n%int64(k.Buckets)
	if int64(b) < r {
		return q + 1
	}
	return q
}

func (k *SKU) validateBuckets() error {
	switch {
	case k.Buckets < 0 || k.Buckets > MaxBuckets:
		return fmt.Errorf("buckets must be 0..%d", MaxBuckets)
	case len(k.HotShards) > 0 && (!k.Hot || !k.Split() || k.HotShard != nil):
		return fmt.Errorf("hotShards only on a hot SKU split into buckets, without hotShard")
	}
	for _, h := range k.HotShards {
		if h < 0 {
			return fmt.Errorf("hotShards must be 0 or more")
		}
	}
	return nil
}

// KeysIn builds the keys of bucket b of (activity, sku): a sub-ledger with
// the SKU's key names under its own hash tag, sk:{a<A>:s<S>:b<B>}:…, so
// every occupy script runs on it unchanged. NoBucket is KeysFor.
func KeysIn(activity, sku int64, b int) SKUKeys {
	if b < 0 {
		return KeysFor(activity, sku)
	}
	var buf [56]byte
	p := string(appendBucketPrefix(buf[:0], activity, sku, b))
	return SKUKeys{Meta: p + "meta", Stock: p + "stock", Users: p + "users", Sold: p + "sold", Claim: p + "claimed", Closed: p + "closed", Qty: p + "qty", Pending: p + "pending",
		Results: p + "r", Rate: p + "rl:"}
}

// ResultsKeyIn is the results hash of bucket b of (activity, sku)
// (ResultsKey for NoBucket).
func ResultsKeyIn(activity, sku int64, b int) string {
	if b < 0 {
		return ResultsKey(activity, sku)
	}
	var buf [56]byte
	return string(append(appendBucketPrefix(buf[:0], activity, sku, b), 'r'))
}

// UsersKeyIn is the users hash (userId -> requestNo of the ticket the user
// holds) of bucket b of (activity, sku), NoBucket for a SKU not split: one
// allocation, not KeysIn's eleven.
func UsersKeyIn(activity, sku int64, b int) string { return keyIn(activity, sku, b, "users") }

// ClaimedKeyIn is the set of claimed requestNos of bucket b of (activity,
// sku), NoBucket for a SKU not split.
func ClaimedKeyIn(activity, sku int64, b int) string { return keyIn(activity, sku, b, "claimed") }

// keyIn is the key name of bucket b of (activity, sku) (the SKU's own for
// NoBucket), in one allocation.
func keyIn(activity, sku int64, b int, name string) string {
	var buf [64]byte
	if b < 0 {
		return string(append(appendPrefix(buf[:0], activity, sku), name...))
	}
	return string(append(appendBucketPrefix(buf[:0], activity, sku, b), name...))
}

// TransfersKey is bucket b's record of the transfers it took part in
// (lua/transfer_debit.lua, transfer_credit.lua): field "d:<id>" the units a
// transfer debited from it, "c:<id>" the units one credited to it (each
// with the time, dropped once old), "f:<id>" one debited and not yet
// credited, the totals "in", "out", "to:<b>" and "from:<b>".
func TransfersKey(activity, sku int64, b int) string {
	var buf [56]byte
	return string(append(appendBucketPrefix(buf[:0], activity, sku, b), "xfer"...))
}

func appendBucketPrefix(b []byte, activity, sku int64, bucket int) []byte {
	b = append(b, "sk:{a"...)
	b = strconv.AppendInt(b, activity, 10)
	b = append(b, ":s"...)
	b = strconv.AppendInt(b, sku, 10)
	b = append(b, ":b"...)
	b = strconv.AppendInt(b, int64(bucket), 10)
	return append(b, "}:"...)
}

// TicketKeys are the keys of the (sub-)ledger that holds m's ticket: the
// bucket its ticket number names, else the SKU's own.
func TicketKeys(m *Message) SKUKeys {
	return KeysIn(m.ActivityID, m.SKUID, TicketBucket(m.RequestNo))
}

// TicketBucket is the bucket a ticket number names, NoBucket when it names
// none (or is not a ticket number).
func TicketBucket(rn string) int {
	_, _, b, _, ok := ParseTicket(rn)
	if !ok {
		return NoBucket
	}
	return b
}

// FormatShards writes a bucketed SKU's HotShards as the database keeps
// them: "0,1" ("" for none).
func FormatShards(hs []int) string {
	var b []byte
	for i, h := range hs {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(h), 10)
	}
	return string(b)
}

// ParseShards reads FormatShards' form back.
func ParseShards(s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(f)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("hot shards %q: not a list of shard numbers", s)
		}
		out = append(out, n)
	}
	return out, nil
}

package consumer

import (
	"context"
	"strings"
	"testing"

	"seckill/internal/keyring"
	"seckill/internal/testenv"
	"seckill/sale"
)

// TestForgedUnsignedAndOverLimitMessagesAreDeadLettered: copies of a held
// ticket that claim 5 units at 0.01 — one unsigned, one signed
// with a guessed secret under the real key id, one signed with an id no
// consumer holds — and a signed message over the SKU's per-user limit go
// to the dead-letter topic with their reasons, and nothing of them
// reaches Redis (not one command: no claim, no release, no result) or the
// database. The genuine message of the same ticket then makes the order
// of one unit at the catalog's price.
func TestForgedUnsignedAndOverLimitMessagesAreDeadLettered(t *testing.T) {
	t.Parallel()
	runTest(t, func(t *testing.T, r *rig) {
		ctx := context.Background()
		real := r.occupy(t, skuID, 21)
		forged := real
		forged.Quantity, forged.UnitPrice = 5, 1
		guessed, err := sale.NewSigner(sale.SigningConfig{Keys: []keyring.Key{{ID: testSigning.Keys[0].ID, Secret: "a-guessed-secret-0123456789abcdef"}}})
		if err != nil {
			t.Fatal(err)
		}
		unknown, err := sale.NewSigner(sale.SigningConfig{Keys: []keyring.Key{{ID: "x9", Secret: "another-secret-0123456789abcdef"}}})
		if err != nil {
			t.Fatal(err)
		}
		r.produceRaw(t, "same", forged.Encode(nil))
		r.produceRaw(t, "same", guessed.AppendSigned(nil, &forged))
		r.produceRaw(t, "same", unknown.AppendSigned(nil, &forged))
		r.produceRaw(t, "same", signed(&forged)) // signed, but 5 > limit 1
		want := []string{sale.ErrUnsigned.Error(), sale.ErrBadSignature.Error(), sale.ErrUnknownKey.Error(), "quantity 5 above the per-user limit 1"}

		rc := r.redis.Client(t)
		before := testenv.CommandStats(t, rc)
		c := r.start(t)
		dl := r.readDLQ(t, len(want))
		eventually(t, "offsets committed past them", func() bool { return r.committed(t, c.cfg.Group) == int64(len(want)) })
		if got := testenv.CommandStats(t, rc).Since(before); len(got) != 0 {
			t.Errorf("Redis ran %v for messages that were dead-lettered", got)
		}
		for i, m := range dl {
			reason := ""
			for _, h := range m.Headers {
				if string(h.Key) == HeaderReason {
					reason = string(h.Value)
				}
			}
			if !strings.Contains(reason, want[i]) {
				t.Errorf("letter %d reason %q, want %q", i, reason, want[i])
			}
		}
		if got := count(t, r, outDLQ); got != len(want) {
			t.Errorf("dlq = %d, want %d", got, len(want))
		}
		if k := r.counts(t, skuID); k.Claimed != 0 || k.Pending != 1 || k.Remaining != stockN-1 {
			t.Errorf("redis counts %+v: the held ticket must stay as the engine left it", k)
		}
		if e, err := r.res.Read(ctx, real.UserID, real.RequestNo); err != nil || e.State != sale.ResultQueuing {
			t.Errorf("a result was written for the forged copies: %+v %v, want the occupy script's QUEUING", e, err)
		}
		if n := r.orders(t, skuID); n != 0 {
			t.Errorf("%d orders from forged messages", n)
		}

		// The genuine message, signed, still says price 0.01: the order
		// takes the catalog's price.
		real.UnitPrice = 1
		r.produce(t, real)
		if e := r.result(t, real.RequestNo); e.State != sale.ResultSuccess {
			t.Fatalf("genuine message: %+v", e)
		}
		o, err := r.st.OrderByRequest(ctx, real.RequestNo)
		if err != nil || o.Quantity != 1 || o.UnitPrice != 990 || o.Amount != 990 {
			t.Fatalf("order %+v, %v: want 1 unit at the catalog's 9.90", o, err)
		}
	})
}

// TestGenuineMessagesOfAnyBytesAreOrdered: the engine's signature covers
// the bytes it sends, so a genuine ticket whose trace id (a client's
// requestId or X-Trace-Id) holds bytes that are not UTF-8, quotes,
// control characters or characters JSON may escape becomes an order; it
// is never dead-lettered as forged.
func TestGenuineMessagesOfAnyBytesAreOrdered(t *testing.T) {
	t.Parallel()
	runTest(t, func(t *testing.T, r *rig) {
		ctx := context.Background()
		traces := []string{"\xff\xfe", "é<&>\u2028", "a\"b\\c\n\x00", "\xc3"}
		var msgs []sale.Message
		for i, tr := range traces {
			m := r.occupy(t, skuID, int64(31+i))
			m.TraceID = tr
			msgs = append(msgs, m)
		}
		r.produce(t, msgs...)
		r.start(t)
		for _, m := range msgs {
			if e := r.result(t, m.RequestNo); e.State != sale.ResultSuccess {
				t.Errorf("trace %q: result %+v, want SUCCESS", m.TraceID, e)
			}
			o, err := r.st.OrderByRequest(ctx, m.RequestNo)
			if err != nil || o.UserID != m.UserID {
				t.Errorf("trace %q: order %+v, %v", m.TraceID, o, err)
			}
		}
		if got := count(t, r, outDLQ); got != 0 {
			t.Errorf("%d genuine messages dead-lettered", got)
		}
	})
}

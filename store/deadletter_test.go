package store

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"seckill/sale"
)

// TestDeadLettersAreQuarantinedOnceInTheBatch: quarantined letters are
// written with the batch's orders (or alone), cut to their bounds, made
// fit for text columns whatever bytes a hostile message held, once per
// message however often the batch is saved; each letter naming a ticket
// adds DEAD_LETTERED to that ticket's history, sent or quarantined.
func TestDeadLettersAreQuarantinedOnceInTheBatch(t *testing.T) {
	runTest(t, func(t *testing.T, r runner) {
		ctx := context.Background()
		s := r.open(t)
		put(t, s, activity(1, sale.SKU{ID: 11, Stock: 5, Price: 990}))
		huge := bytes.Repeat([]byte{0xff}, MaxDeadLetterPayload+100)
		letters := []DeadLetter{
			{Topic: sale.OrdersTopic, Partition: 1, Offset: 7, Key: bytes.Repeat([]byte("k"), 5000), Payload: huge,
				Size: 1 << 20, Digest: strings.Repeat("a", 64), Reason: "too big \xff" + strings.Repeat("r", 300),
				RequestNo: "1-11-5", Quarantined: true},
			{Topic: sale.OrdersTopic, Partition: 1, Offset: 8, Payload: []byte("{}"), Size: 2, Digest: "d",
				Reason: "order message signature invalid", RequestNo: "1-11-6"},
			{Topic: sale.OrdersTopic, Partition: 0, Offset: 3, Payload: nil, Digest: "e", Reason: "undecodable", Quarantined: true},
		}
		for range 2 { // a redelivered batch
			out, err := s.SaveBatch(ctx, []sale.Message{msg("1-11-1", 1, 11, 100)}, DeadLettered(letters))
			if err != nil || len(out) != 1 {
				t.Fatalf("SaveBatch: %v %v", out, err)
			}
		}
		if _, err := s.SaveBatch(ctx, nil, DeadLettered(letters[2:])); err != nil {
			t.Fatalf("letters alone: %v", err)
		}
		got, err := s.QuarantinedLetters(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 {
			t.Fatalf("%d quarantined rows, want 2 (once each, the sent letter not kept): %+v", len(got), got)
		}
		l := got[0]
		if l.Partition != 1 || l.Offset != 7 || len(l.Payload) != MaxDeadLetterPayload || len(l.Key) != MaxDeadLetterKey ||
			l.Size != 1<<20 || l.RequestNo != "1-11-5" || len(l.Reason) > 255 || !strings.HasPrefix(l.Reason, "too big \uFFFD") {
			t.Errorf("quarantined %+v", l)
		}
		if got[1].Offset != 3 || len(got[1].Payload) != 0 {
			t.Errorf("second row %+v", got[1])
		}
		for _, rn := range []string{"1-11-5", "1-11-6"} {
			evs, err := s.RequestEvents(ctx, rn)
			if err != nil || len(evs) == 0 || evs[0].Status != EventDeadLettered {
				t.Errorf("history of %s: %+v, %v", rn, evs, err)
			}
		}
		if _, err := s.RequestLog(ctx, "1-11-6"); err == nil {
			t.Errorf("a dead letter wrote the request log of the ticket it names")
		}
	})
}

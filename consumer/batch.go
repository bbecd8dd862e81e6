package consumer

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/IBM/sarama"
	"go.uber.org/zap"

	"seckill/sale"
	"seckill/stock/results"
	"seckill/store"
)

// ticket is one decoded message on its way through a batch.
type ticket struct {
	km      *sarama.ConsumerMessage
	m       sale.Message
	held    bool   // claimed in Redis: an order may be made
	priced  bool   // the catalog knows the SKU; m.UnitPrice is its price
	release bool   // the ticket's occupancy must be given back (force)
	outcome string // metric label
	reason  string // why it failed (outFailed)
	res     results.Entry
}

// messageID names the Kafka message the ticket came in (the request
// log's message_id): "partition/offset".
func (t *ticket) messageID() string {
	if t.km == nil {
		return ""
	}
	return strconv.FormatInt(int64(t.km.Partition), 10) + "/" + strconv.FormatInt(t.km.Offset, 10)
}

func (t *ticket) fields() []zap.Field {
	return []zap.Field{zap.String("requestNo", t.m.RequestNo), zap.String("traceId", t.m.TraceID),
		zap.Int64("activityId", t.m.ActivityID), zap.Int64("sku", t.m.SKUID), zap.Int64("userId", t.m.UserID)}
}

func (t *ticket) result(state, orderNo, code string) {
	t.res = results.Entry{RequestNo: t.m.RequestNo, Activity: t.m.ActivityID, SKU: t.m.SKUID,
		Owner: t.m.UserID, State: state, OrderNo: orderNo, Code: code}
}

// process runs one batch to its end and commits its offsets. An error means
// a dependency stayed down: nothing was committed and the batch will be
// delivered again. ctx is not cancelled by the session's end (a batch in
// progress completes); every call is bounded by cfg.Timeout.
func (c *Consumer) process(ctx context.Context, sess sarama.ConsumerGroupSession, batch []*sarama.ConsumerMessage) error {
	c.m.batches.Inc()
	c.m.batchSize.Observe(float64(len(batch)))

	// 1. Decode and verify; dead-letter what cannot be decoded, is not
	// signed by a listed key or breaks the SKU's rules, before anything
	// touches Redis or the database (verification is CPU only).
	tickets := make([]*ticket, 0, len(batch))
	var letters []deadLetter
	for _, km := range batch {
		m, err := sale.DecodeMessage(km.Value)
		decoded := err == nil
		if decoded {
			err = c.sign.Verify(km.Value, &m)
		}
		if err != nil {
			var named *sale.Message
			if decoded {
				named = &m
			}
			letters = append(letters, letter(km, named, err.Error()))
			c.log.Error("undecodable or unverified order message dead-lettered", zap.String("topic", km.Topic),
				zap.Int32("partition", km.Partition), zap.Int64("offset", km.Offset), zap.Int("bytes", len(km.Value)),
				zap.String("requestNo", cutString(m.RequestNo, sale.MaxRequestNoLen)), zap.Error(err))
			continue
		}
		tickets = append(tickets, &ticket{km: km, m: m})
	}
	c.knowSKUs(ctx, tickets)
	if err := c.priceSKUs(ctx, tickets); err != nil {
		return err
	}
	tickets, letters = c.checkRules(tickets, letters)
	// Every letter goes somewhere: to the dead-letter topic, or, refused
	// there, into the orders database with the batch's orders. No letter
	// holds the batch back.
	recorded := c.sendDLQ(letters)
	c.m.messages.WithLabelValues(outDLQ).Add(float64(len(letters)))

	// 2. Claim every ticket in Redis.
	if err := c.claim(ctx, tickets); err != nil {
		return fmt.Errorf("%w: %v", ErrUncommitted, err)
	}
	var held, notHeld []*ticket
	for _, t := range tickets {
		if t.held {
			held = append(held, t)
		} else {
			notHeld = append(notHeld, t)
		}
	}
	if err := c.released(ctx, notHeld); err != nil {
		return err
	}

	// 3. Orders in one transaction (retried, then message by message),
	// the letters' records with them.
	if err := c.save(ctx, held, recorded); err != nil {
		return err
	}

	// 4. Results in one pipelined write. They go before the releases: if
	// Redis fails in between, the redelivered batch finds the tickets
	// still claimed and reaches the same answers, whereas a ticket
	// released first would then look "released" to the redelivery.
	entries := make([]results.Entry, len(tickets))
	for i, t := range tickets {
		entries[i] = t.res
	}
	if err := c.retry(ctx, "write results", func(ctx context.Context) error {
		return c.res.Write(ctx, entries...)
	}); err != nil {
		return fmt.Errorf("%w: %v", ErrUncommitted, err)
	}

	// 5. Dead-letter the failed tickets before their stock goes back: a
	// redelivery finds a released ticket answered already and does not
	// fail it again, so a letter lost after the release would be lost for
	// good, while one sent twice (the release failed, the batch came back)
	// is harmless.
	var failed []deadLetter
	for _, t := range tickets {
		if t.outcome == outFailed {
			failed = append(failed, deadLetter{km: t.km, reason: t.reason})
		}
	}
	if err := c.recordLetters(ctx, c.sendDLQ(failed)); err != nil {
		return err
	}

	// 6. Give back the stock of tickets that got no order, then commit.
	if err := c.releaseAll(ctx, tickets); err != nil {
		return err
	}
	for _, t := range tickets {
		c.m.messages.WithLabelValues(t.outcome).Inc()
	}
	for _, km := range batch {
		sess.MarkMessage(km, "")
	}
	sess.Commit()
	return nil
}

// knowSKUs reloads the catalog when a ticket names an activity it does not
// know: Claim and Release route by it, and a hot SKU routed to the default
// shard would look released.
func (c *Consumer) knowSKUs(ctx context.Context, tickets []*ticket) {
	cat := c.stock.Catalog()
	for _, t := range tickets {
		if _, _, ok := cat.Lookup(t.m.ActivityID, t.m.SKUID); !ok {
			ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
			err := cat.Load(ctx)
			cancel()
			if err != nil {
				c.log.Warn("catalog reload failed", append(t.fields(), zap.Error(err))...)
			}
			return
		}
	}
}

// checkRules holds a verified message to its SKU as the orders database
// knows it (prices, read by priceSKUs), whoever signed it: a quantity
// above the SKU's per-user limit is dead-lettered (the occupy script never
// grants one, so the occupancy, if any, is left to the orphan sweeper),
// and the unit price is the database's, never the message's or Redis'. A
// ticket of a SKU the database does not know goes on with price 0: its
// claim normally answers NOT_HELD, and a held one is failed in save (no
// order without a catalog price).
func (c *Consumer) checkRules(tickets []*ticket, letters []deadLetter) ([]*ticket, []deadLetter) {
	kept := tickets[:0]
	for _, t := range tickets {
		sku, ok := c.prices.get(t.m.ActivityID, t.m.SKUID)
		if !ok {
			t.m.UnitPrice = 0
			kept = append(kept, t)
			continue
		}
		if limit := max(sku.LimitPerUser, 1); t.m.Quantity > limit {
			reason := fmt.Sprintf("quantity %d above the per-user limit %d of activity %d sku %d",
				t.m.Quantity, limit, t.m.ActivityID, t.m.SKUID)
			letters = append(letters, letter(t.km, &t.m, reason))
			c.log.Error("order message over the per-user limit dead-lettered", append(t.fields(), zap.String("reason", reason))...)
			continue
		}
		t.m.UnitPrice = sku.Price
		t.priced = true
		kept = append(kept, t)
	}
	return kept, letters
}

// claim claims every ticket with one script call per SKU (Stock.ClaimBatch:
// the same answers as a Claim per ticket), retrying while Redis fails.
// Claims are idempotent, so a retry asks again for every ticket.
func (c *Consumer) claim(ctx context.Context, tickets []*ticket) error {
	if len(tickets) == 0 {
		return nil
	}
	msgs := make([]*sale.Message, len(tickets))
	for i, t := range tickets {
		msgs[i] = &t.m
	}
	return c.retry(ctx, "claim tickets", func(ctx context.Context) error {
		held, err := c.stock.ClaimBatch(ctx, msgs)
		if err != nil {
			return err
		}
		for i, t := range tickets {
			t.held = held[i]
		}
		return nil
	})
}

// released answers tickets whose occupancy was gone when the consumer came
// to claim them. Normally the engine gave up on the ticket: FAIL RELEASED,
// no order. But a redelivered ticket may have been answered already (and
// released since: sold out, duplicate, closed unpaid), or its order may
// exist while Redis lost the record; then that answer stands. Their
// results are read in one pipelined round trip.
func (c *Consumer) released(ctx context.Context, tickets []*ticket) error {
	if len(tickets) == 0 {
		return nil
	}
	rns := make([]string, len(tickets))
	for i, t := range tickets {
		rns[i] = t.m.RequestNo
	}
	var prevs []results.Entry
	err := c.retry(ctx, "read results", func(ctx context.Context) error {
		var err error
		// The fields alone: the records no longer name these tickets.
		prevs, err = c.res.ReadMany(ctx, rns, nil)
		return err
	})
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUncommitted, err)
	}
	for i, t := range tickets {
		prev := prevs[i]
		if prev.State == sale.ResultSuccess || prev.State == sale.ResultFail {
			t.res, t.outcome = prev, outReleased
			if prev.State == sale.ResultSuccess {
				t.outcome = outExisting
			}
			continue
		}
		var o store.Order
		err = c.retry(ctx, "look up order", func(ctx context.Context) error {
			var err error
			o, err = c.st.OrderByRequest(ctx, t.m.RequestNo)
			if errors.Is(err, store.ErrNotFound) {
				return nil
			}
			return err
		})
		if err != nil {
			return fmt.Errorf("%w: %v", ErrUncommitted, err)
		}
		if o.OrderNo != "" {
			t.outcome = outExisting
			c.answerOrder(t, o.OrderNo, o.Status)
			continue
		}
		t.outcome = outReleased
		t.result(sale.ResultFail, "", sale.FailReleased)
		c.logRequest(ctx, t, store.StatusFailed, "", "occupancy released before the order was made")
		c.log.Info("ticket released before its order", t.fields()...)
	}
	return nil
}

// answerOrder sets the result of a ticket answered by an existing order.
func (c *Consumer) answerOrder(t *ticket, orderNo, status string) {
	if status == store.OrderClosed {
		t.result(sale.ResultFail, orderNo, sale.FailClosed)
		return
	}
	t.result(sale.ResultSuccess, orderNo, "")
}

// save writes the held tickets' orders and the records of the batch's dead
// letters (store.DeadLettered). The batch transaction is retried with
// backoff; if it keeps failing while the database answers, the letters are
// written alone and each ticket is tried alone so one bad message cannot
// hold the others back, and a ticket that still fails is failed for good.
// If the database does not answer at all, nothing is failed: the batch
// stays uncommitted.
func (c *Consumer) save(ctx context.Context, held []*ticket, letters []store.DeadLetter) error {
	priced := held[:0:0]
	for _, t := range held {
		if t.priced {
			priced = append(priced, t)
			continue
		}
		c.fail(ctx, t, fmt.Errorf("activity %d sku %d unknown to the catalog: no price to order at", t.m.ActivityID, t.m.SKUID))
	}
	held = priced
	if len(held) == 0 && len(letters) == 0 {
		return nil
	}
	msgs := make([]sale.Message, len(held))
	ids := make([]string, len(held))
	for i, t := range held {
		msgs[i], ids[i] = t.m, t.messageID()
	}
	var outs []store.Outcome
	err := c.retry(ctx, "save batch", func(ctx context.Context) error {
		var err error
		outs, err = c.saveBatch(ctx, msgs, ids, store.DeadLettered(letters))
		return err
	})
	if err == nil {
		seen := make(map[string]bool, len(held))
		for i, t := range held {
			c.apply(t, outs[i])
			// The same ticket twice in one batch made one order.
			if seen[t.m.RequestNo] && t.outcome == outCreated {
				t.outcome = outExisting
			}
			seen[t.m.RequestNo] = true
		}
		return nil
	}
	pctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	perr := c.st.Ping(pctx)
	cancel()
	if perr != nil {
		return fmt.Errorf("%w: database down: %v", ErrUncommitted, errors.Join(err, perr))
	}
	c.log.Warn("batch keeps failing; saving message by message", zap.Int("size", len(held)), zap.Error(err))
	if err := c.recordLetters(ctx, letters); err != nil {
		return err
	}
	for _, t := range held {
		tctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
		outs, err := c.saveBatch(tctx, []sale.Message{t.m}, []string{t.messageID()})
		cancel()
		if err == nil {
			c.apply(t, outs[0])
			continue
		}
		// A database that went away meanwhile fails no ticket: the batch
		// (the part saved already included) is delivered again.
		pctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
		perr := c.st.Ping(pctx)
		cancel()
		if perr != nil {
			return fmt.Errorf("%w: database down: %v", ErrUncommitted, errors.Join(err, perr))
		}
		c.fail(ctx, t, err)
	}
	return nil
}

// recordLetters writes the records of dead letters (quarantined ones, and
// the history steps of the tickets they name) in a transaction of their
// own, retried; only a database that stays down leaves the batch
// uncommitted.
func (c *Consumer) recordLetters(ctx context.Context, letters []store.DeadLetter) error {
	if len(letters) == 0 {
		return nil
	}
	err := c.retry(ctx, "record dead letters", func(ctx context.Context) error {
		_, err := c.st.SaveBatch(ctx, nil, store.DeadLettered(letters))
		return err
	})
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUncommitted, err)
	}
	return nil
}

// delivered is the request-log remark of a created order's SUCCESS step.
const delivered = "result written"

// saveBatch writes msgs in one transaction. The SUCCESS step of each new
// order goes into the same transaction (store.Delivered): this batch
// writes its result before its offsets are committed, and a redelivery
// after a failed result write finds the order and writes the result.
func (c *Consumer) saveBatch(ctx context.Context, msgs []sale.Message, ids []string, opts ...store.SaveOption) ([]store.Outcome, error) {
	start := time.Now()
	outs, err := c.st.SaveBatch(ctx, msgs, append(opts, store.Delivered(delivered), store.MessageIDs(ids))...)
	c.m.tx.Observe(time.Since(start).Seconds())
	return outs, err
}

// apply turns a store outcome into the ticket's result (DESIGN §7: a
// duplicate is "already done", answered with the existing order).
func (c *Consumer) apply(t *ticket, o store.Outcome) {
	switch o.Kind {
	case store.Created:
		t.outcome = outCreated
		t.result(sale.ResultSuccess, o.OrderNo, "")
	case store.Existing:
		t.outcome = outExisting
		c.answerOrder(t, o.OrderNo, o.OrderStatus)
	case store.Duplicate:
		t.outcome, t.release = outDuplicate, true
		c.answerOrder(t, o.OrderNo, o.OrderStatus)
		c.log.Info("duplicate ticket of a user with an order", append(t.fields(), zap.String("orderNo", o.OrderNo))...)
	default:
		t.outcome, t.release = outSoldOut, true
		t.result(sale.ResultFail, "", sale.FailSoldOut)
		c.log.Info("database snapshot sold out", t.fields()...)
	}
}

// fail gives up on a ticket: its stock goes back, the buyer reads FAIL, the
// message is dead-lettered with the reason.
func (c *Consumer) fail(ctx context.Context, t *ticket, err error) {
	t.outcome, t.release = outFailed, true
	t.reason = err.Error()
	t.result(sale.ResultFail, "", sale.FailInvalid)
	c.logRequest(ctx, t, store.StatusFailed, "", "order failed: "+t.reason)
	c.log.Error("order message failed for good; releasing and dead-lettering", append(t.fields(), zap.Error(err))...)
}

// releaseAll releases (force: they are claimed) the tickets that got no
// order: one release script call per SKU, one round trip per shard
// (Stock.ReleaseBatch). Releases are idempotent and bound to their
// tickets, so a retry sends them all again: those released already answer
// NOT_HELD and give nothing back twice.
func (c *Consumer) releaseAll(ctx context.Context, tickets []*ticket) error {
	var todo []*sale.Message
	for _, t := range tickets {
		if t.release {
			todo = append(todo, &t.m)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	err := c.retry(ctx, "release tickets", func(ctx context.Context) error {
		_, err := c.stock.ReleaseBatch(ctx, todo, true)
		return err
	})
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUncommitted, err)
	}
	return nil
}

// logRequest records a ticket's state in the request log. It is best
// effort: the result in Redis is what the buyer reads, and the stock path
// does not depend on it.
func (c *Consumer) logRequest(ctx context.Context, t *ticket, status, orderNo, remark string) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	err := c.st.LogRequest(ctx, store.LogEntry{RequestNo: t.m.RequestNo, ActivityID: t.m.ActivityID,
		SKUID: t.m.SKUID, UserID: t.m.UserID, Quantity: t.m.Quantity, Status: status, OrderNo: orderNo,
		TraceID: t.m.TraceID, Remark: remark})
	if err != nil {
		c.log.Warn("request log write failed", append(t.fields(), zap.Error(err))...)
	}
}

// retry runs f up to 1+Retries times, each bounded by Timeout, waiting
// RetryBackoff (doubling) between attempts; it gives up at once when ctx
// ends.
func (c *Consumer) retry(ctx context.Context, what string, f func(ctx context.Context) error) error {
	backoff := c.cfg.RetryBackoff
	var err error
	for attempt := 0; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
		err = f(actx)
		cancel()
		if err == nil {
			return nil
		}
		if attempt >= c.cfg.Retries {
			return fmt.Errorf("%s after %d attempts: %w", what, attempt+1, err)
		}
		c.log.Warn("retrying", zap.String("op", what), zap.Int("attempt", attempt+1),
			zap.Duration("backoff", backoff), zap.Error(err))
		select {
		case <-ctx.Done(): // the drain's bound (Close): leave the batch for redelivery
			return fmt.Errorf("%s after %d attempts: %w", what, attempt+1, errors.Join(err, ctx.Err()))
		case <-time.After(backoff):
		}
		backoff *= 2
	}
}

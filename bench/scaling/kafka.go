package main

import (
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/IBM/sarama"

	"seckill/bench/benchkit"
	"seckill/engine"
)

// orderBytes is about the size of a signed order message (JSON ticket,
// user, SKU, price, trace id and signature).
const orderBytes = 320

// measureKafka is the broker's ceiling: `seckill broker` (kfake, the
// Kafka-protocol broker dev and the tests use) with the orders topic on
// o.partitions partitions; o.workers Sarama producers configured as the
// engine's (engine.SaramaConfig: acks=all, idempotent, its batching)
// produce order-sized messages keyed by user for o.dur, then one consumer
// reads them all back. Each ceiling is messages per second of the broker's
// CPU. A real Kafka broker's ceiling differs (and replicates to two
// others): docs/SCALING.md says how the model uses this one.
func measureKafka(o options) ([]figure, error) {
	addr := benchkit.FreeAddr()
	broker, err := benchkit.Start(o.out, "kafka-broker", o.bin, nil, "broker", "--listen", addr,
		"--data-dir", filepath.Join(o.out, "kafka-broker-data"), "--partitions", strconv.Itoa(o.partitions))
	if err != nil {
		return nil, err
	}
	defer broker.StopWithin(10 * time.Second)
	if err := benchkit.WaitPort(broker, addr, 20*time.Second); err != nil {
		return nil, err
	}
	k := engine.DefaultConfig().Kafka
	k.Brokers = []string{addr}
	sc, err := engine.SaramaConfig(k, "scaling")
	if err != nil {
		return nil, err
	}
	value := make([]byte, orderBytes)
	for i := range value {
		value[i] = 'a' + byte(i%26)
	}
	logf("kafka: produce with %d producers, %v", o.workers, o.dur)
	w, err := startCPU(broker.PID())
	if err != nil {
		return nil, err
	}
	var (
		mu       sync.Mutex
		produced int64
		firstErr error
		wg       sync.WaitGroup
	)
	deadline := time.Now().Add(o.dur)
	for g := range o.workers {
		ap, err := sarama.NewAsyncProducer(k.Brokers, sc)
		if err != nil {
			return nil, err
		}
		wg.Add(2)
		go func() { // the broker's answers, until AsyncClose closes both channels
			defer wg.Done()
			var acked int64
			succ, errs := ap.Successes(), ap.Errors()
			for succ != nil || errs != nil {
				select {
				case _, ok := <-succ:
					if !ok {
						succ = nil
						continue
					}
					acked++
				case e, ok := <-errs:
					if !ok {
						errs = nil
						continue
					}
					mu.Lock()
					if firstErr == nil {
						firstErr = e.Err
					}
					mu.Unlock()
				}
			}
			mu.Lock()
			produced += acked
			mu.Unlock()
		}()
		go func() { // sends until the deadline (the input channel bounds what is in flight)
			defer wg.Done()
			user := int64(g+1) * 1e12
			for time.Now().Before(deadline) {
				user++
				ap.Input() <- &sarama.ProducerMessage{Topic: k.Topic, Key: sarama.StringEncoder(strconv.FormatInt(user, 10)), Value: sarama.ByteEncoder(value)}
			}
			ap.AsyncClose()
		}()
	}
	wg.Wait()
	pcpu, pwall, err := w.stop()
	if err != nil {
		return nil, err
	}
	if firstErr != nil {
		return nil, fmt.Errorf("produce: %w", firstErr)
	}
	logf("kafka: %d messages acked in %v, broker CPU %v", produced, pwall.Round(time.Millisecond), pcpu)

	logf("kafka: consume them back")
	cc := sarama.NewConfig()
	cc.Consumer.Offsets.Initial = sarama.OffsetOldest
	c, err := sarama.NewConsumer(k.Brokers, cc)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	parts, err := c.Partitions(k.Topic)
	if err != nil {
		return nil, err
	}
	if w, err = startCPU(broker.PID()); err != nil {
		return nil, err
	}
	counts := make(chan int64, len(parts))
	stop := time.Now().Add(max(4*o.dur, 30*time.Second))
	for _, p := range parts {
		pc, err := c.ConsumePartition(k.Topic, p, sarama.OffsetOldest)
		if err != nil {
			return nil, err
		}
		hw := pc.HighWaterMarkOffset()
		go func() {
			defer pc.Close()
			var n int64
			for n < hw && time.Now().Before(stop) {
				select {
				case <-pc.Messages():
					n++
				case <-time.After(time.Until(stop)):
				}
			}
			counts <- n
		}()
	}
	var consumed int64
	for range parts {
		consumed += <-counts
	}
	ccpu, cwall, err := w.stop()
	if err != nil {
		return nil, err
	}
	if consumed < produced {
		return nil, fmt.Errorf("consumed %d of the %d messages produced within %v", consumed, produced, max(4*o.dur, 30*time.Second))
	}
	logf("kafka: %d messages consumed in %v, broker CPU %v", consumed, cwall.Round(time.Millisecond), ccpu)
	note := fmt.Sprintf("%d partitions, %d-byte messages, kfake", o.partitions, orderBytes)
	return []figure{
		{part: "broker", what: "produce/s (acks=all, idempotent)", ceiling: perCore(produced, pcpu), seen: float64(produced) / pwall.Seconds(), note: note + fmt.Sprintf(", %d producers", o.workers),
			cmd: fmt.Sprintf("go run ./bench/scaling -only kafka -d %v -workers %d -partitions %d (Sarama with engine.SaramaConfig against seckill broker, its CPU from /proc)", o.dur, o.workers, o.partitions)},
		{part: "broker", what: "consume/s", ceiling: perCore(consumed, ccpu), seen: float64(consumed) / cwall.Seconds(), note: note + ", one Sarama consumer over every partition",
			cmd: fmt.Sprintf("go run ./bench/scaling -only kafka -d %v -workers %d -partitions %d (the produce run's messages read back)", o.dur, o.workers, o.partitions)},
	}, nil
}

package devserver

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"go.uber.org/zap/zaptest"

	"seckill/sale"
)

// These tests run the broker persisted in a temporary directory with small
// segments (4 KiB: a few dozen records), so a few thousand records span
// many segment files.

const testSegment = 4 << 10

func startTestKafka(t *testing.T, dir string, partitions int32) *Kafka {
	t.Helper()
	k, err := StartKafka(KafkaConfig{Dir: dir, Partitions: partitions, SegmentBytes: testSegment})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func saramaClient(t *testing.T, k *Kafka) sarama.Client {
	t.Helper()
	cfg := sarama.NewConfig()
	cfg.Producer.Return.Successes = true
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Consumer.Offsets.AutoCommit.Enable = false
	c, err := sarama.NewClient(k.Addrs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// record is the value of the n-th record of partition p: 100 bytes, so
// that ~40 make a segment.
func record(p int32, n int) string {
	return fmt.Sprintf("p%d-%06d-%s", p, n, strings.Repeat("x", 90))
}

// produce writes n records to each partition, in batches of 50.
func produce(t *testing.T, c sarama.Client, parts []int32, n int) {
	t.Helper()
	pr, err := sarama.NewSyncProducerFromClient(c)
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	for _, p := range parts {
		for i := 0; i < n; i += 50 {
			var msgs []*sarama.ProducerMessage
			for j := i; j < min(i+50, n); j++ {
				msgs = append(msgs, &sarama.ProducerMessage{Topic: sale.OrdersTopic, Partition: p, Value: sarama.StringEncoder(record(p, j))})
			}
			if err := pr.SendMessages(msgs); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// commit commits offset for group in partition p, as a consumer does once
// it has processed everything below it (a commit outside any generation:
// the group has no members).
func commit(t *testing.T, c sarama.Client, group string, p int32, offset int64) {
	t.Helper()
	b, err := c.Coordinator(group)
	if err != nil {
		t.Fatal(err)
	}
	req := &sarama.OffsetCommitRequest{Version: 2, ConsumerGroup: group, ConsumerGroupGeneration: -1}
	req.AddBlock(sale.OrdersTopic, p, offset, 0, "")
	resp, err := b.CommitOffset(req)
	if err != nil {
		t.Fatal(err)
	}
	if kerr := resp.Errors[sale.OrdersTopic][p]; kerr != sarama.ErrNoError {
		t.Fatalf("commit %s %d/%d: %v", group, p, offset, kerr)
	}
}

func committedOffset(t *testing.T, c sarama.Client, group string, p int32) int64 {
	t.Helper()
	admin, err := sarama.NewClusterAdminFromClient(c)
	if err != nil {
		t.Fatal(err)
	}
	res, err := admin.ListConsumerGroupOffsets(group, map[string][]int32{sale.OrdersTopic: {p}})
	if err != nil {
		t.Fatal(err)
	}
	if b := res.GetBlock(sale.OrdersTopic, p); b != nil {
		return b.Offset
	}
	return -1
}

// readAll reads partition p from its first offset to its end and returns
// the first offset and the values.
func readAll(t *testing.T, c sarama.Client, p int32) (int64, []string) {
	t.Helper()
	first, err := c.GetOffset(sale.OrdersTopic, p, sarama.OffsetOldest)
	if err != nil {
		t.Fatal(err)
	}
	end, err := c.GetOffset(sale.OrdersTopic, p, sarama.OffsetNewest)
	if err != nil {
		t.Fatal(err)
	}
	if first == end {
		return first, nil
	}
	cons, err := sarama.NewConsumerFromClient(c)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	pc, err := cons.ConsumePartition(sale.OrdersTopic, p, first)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	var vals []string
	timeout := time.After(20 * time.Second)
	for next := first; next < end; {
		select {
		case m := <-pc.Messages():
			if m.Offset != next {
				t.Fatalf("partition %d: offset %d read after %d", p, m.Offset, next-1)
			}
			vals = append(vals, string(m.Value))
			next++
		case err := <-pc.Errors():
			t.Fatal(err)
		case <-timeout:
			t.Fatalf("partition %d: read %d of %d..%d", p, len(vals), first, end)
		}
	}
	return first, vals
}

// wantRecords checks that vals are the records from..n-1 of partition p,
// unchanged and in order.
func wantRecords(t *testing.T, p int32, first int64, vals []string, from int64, n int) {
	t.Helper()
	if first > from {
		t.Fatalf("partition %d starts at %d: records %d..%d, not yet consumed, are gone", p, first, from, first-1)
	}
	if len(vals) != n-int(first) {
		t.Fatalf("partition %d: %d records from %d, want %d", p, len(vals), first, n-int(first))
	}
	for i, v := range vals {
		if want := record(p, int(first)+i); v != want {
			t.Fatalf("partition %d offset %d: %q, want %q", p, int(first)+i, v, want)
		}
	}
}

// segmentBytes is the size of partition p's segment files on disk.
func segmentBytes(t *testing.T, dir string, p int32) (files int, bytes int64) {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(dir, "partitions", fmt.Sprintf("%s-%d", sale.OrdersTopic, p)))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".dat") {
			info, err := e.Info()
			if err != nil {
				t.Fatal(err)
			}
			files++
			bytes += info.Size()
		}
	}
	return files, bytes
}

func TestTrimDeletesOnlyWhatEveryGroupConsumed(t *testing.T) {
	const n = 2000
	dir := t.TempDir()
	k := startTestKafka(t, dir, 3)
	c := saramaClient(t, k)
	produce(t, c, []int32{0, 1, 2}, n)
	f0, b0 := segmentBytes(t, dir, 0)
	f1, b1 := segmentBytes(t, dir, 1)
	if f0 < 20 {
		t.Fatalf("partition 0 has %d segment files (%d bytes): the test needs many", f0, b0)
	}

	// Partition 0: consumed up to 1500 by the consumer's group, and up to
	// 1800 by a second group: trimmed to 1500, the slower one.
	// Partition 1: consumed up to 1900 by the consumer's group, not at all
	// by the second: untouched.
	// Partition 2: consumed by nobody: untouched.
	commit(t, c, "orders", 0, 1500)
	commit(t, c, "replay", 0, 1800)
	commit(t, c, "orders", 1, 1900)

	groups := []string{"orders", "replay"}
	got, err := k.Trim(sale.OrdersTopic, groups)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != 1500 {
		t.Fatalf("trimmed %v, want partition 0 to 1500 only", got)
	}
	first, vals := readAll(t, c, 0)
	if first != 1500 {
		t.Fatalf("partition 0 starts at %d after the trim, want 1500", first)
	}
	wantRecords(t, 0, first, vals, 1500, n)
	for _, p := range []int32{1, 2} {
		first, vals := readAll(t, c, p)
		wantRecords(t, p, first, vals, 0, n)
	}
	// The consumed records left the disk, but for the segment that holds
	// offset 1500 (and records just below it).
	f0t, b0t := segmentBytes(t, dir, 0)
	f1t, b1t := segmentBytes(t, dir, 1)
	t.Logf("partition 0: %d segment files, %d bytes before the trim, %d files, %d bytes after; partition 1: %d files, %d bytes after",
		f0, b0, f0t, b0t, f1t, b1t)
	if b0t > b0/4+testSegment || f1t != f1 || b1t != b1 {
		t.Fatalf("partition 0 keeps %d of %d bytes after deleting 3/4 of its records; partition 1 %d of %d", b0t, b0, b1t, b1)
	}

	// A trim again changes nothing; a group the broker does not know has
	// consumed nothing, so naming one stops every trim.
	if got, err := k.Trim(sale.OrdersTopic, groups); err != nil || len(got) != 0 {
		t.Fatalf("second trim: %v %v, want nothing", got, err)
	}
	commit(t, c, "orders", 2, 2000)
	commit(t, c, "replay", 2, 2000)
	if got, err := k.Trim(sale.OrdersTopic, []string{"orders", "replay", "nobody"}); err != nil || len(got) != 0 {
		t.Fatalf("trim with a group that never committed: %v %v, want nothing", got, err)
	}
	if _, err := k.Trim("no.such.topic", groups); err == nil {
		t.Fatal("trim of an unknown topic: no error")
	}
	c.Close()

	// A clean stop and start: the trimmed log is what comes back.
	k.Stop()
	k = startTestKafka(t, dir, 3)
	defer k.Stop()
	c = saramaClient(t, k)
	defer c.Close()
	first, vals = readAll(t, c, 0)
	if first != 1500 {
		t.Fatalf("partition 0 starts at %d after a restart, want 1500", first)
	}
	wantRecords(t, 0, first, vals, 1500, n)
	for _, p := range []int32{1, 2} {
		first, vals := readAll(t, c, p)
		wantRecords(t, p, first, vals, 0, n)
	}
}

// TestTrimSurvivesACrash: a broker that did not stop cleanly (no snapshot
// of where each partition starts) scans its segment files again: the
// deleted segments stay deleted, what was not consumed is all there, and
// at most the first remaining segment's consumed records come back (below
// the group's offset, where no consumer reads).
func TestTrimSurvivesACrash(t *testing.T) {
	const n = 1000
	dir := t.TempDir()
	k := startTestKafka(t, dir, 1)
	c := saramaClient(t, k)
	produce(t, c, []int32{0}, n)
	commit(t, c, "orders", 0, 700)
	if _, err := k.Trim(sale.OrdersTopic, []string{"orders"}); err != nil {
		t.Fatal(err)
	}
	c.Close()
	k.Stop()
	// What a SIGKILL leaves: the segment files without the snapshot that
	// a clean stop writes.
	snaps, _ := filepath.Glob(filepath.Join(dir, "partitions", "*", "snapshot.json"))
	if len(snaps) == 0 {
		t.Fatal("a clean stop wrote no partition snapshot: the crash is not simulated")
	}
	for _, s := range snaps {
		if err := os.Remove(s); err != nil {
			t.Fatal(err)
		}
	}
	k = startTestKafka(t, dir, 1)
	defer k.Stop()
	c = saramaClient(t, k)
	defer c.Close()
	first, vals := readAll(t, c, 0)
	t.Logf("after the crash partition 0 starts at %d (the group's offset: 700)", first)
	if first < 700-testSegment/100 {
		t.Fatalf("after the crash partition 0 starts at %d: more than one segment below 700 came back", first)
	}
	wantRecords(t, 0, first, vals, 700, n)
	if got := committedOffset(t, c, "orders", 0); got != 700 {
		t.Fatalf("the group's offset after the crash: %d, want 700", got)
	}
	// The next trim deletes what came back.
	if got, err := k.Trim(sale.OrdersTopic, []string{"orders"}); err != nil || (first < 700 && got[0] != 700) {
		t.Fatalf("trim after the crash: %v %v", got, err)
	}
}

// TestTrimConsumedRunsUntilStop: the schedule trims as the group commits,
// and Stop trims once more, so a clean stop leaves only what the group has
// not consumed.
func TestTrimConsumedRunsUntilStop(t *testing.T) {
	const n = 600
	dir := t.TempDir()
	k := startTestKafka(t, dir, 1)
	k.TrimConsumed(sale.OrdersTopic, []string{"orders"}, 20*time.Millisecond, zaptest.NewLogger(t))
	c := saramaClient(t, k)
	produce(t, c, []int32{0}, n)
	commit(t, c, "orders", 0, 200)
	deadline := time.Now().Add(10 * time.Second)
	for {
		first, err := c.GetOffset(sale.OrdersTopic, 0, sarama.OffsetOldest)
		if err != nil {
			t.Fatal(err)
		}
		if first == 200 {
			break
		}
		if first > 200 || time.Now().After(deadline) {
			t.Fatalf("partition 0 starts at %d, want 200 once the group committed 200", first)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Committed just before the stop: the last pass trims it.
	k.TrimConsumed(sale.OrdersTopic, []string{"orders"}, time.Hour, zaptest.NewLogger(t))
	commit(t, c, "orders", 0, 450)
	c.Close()
	k.Stop()
	k = startTestKafka(t, dir, 1)
	defer k.Stop()
	c = saramaClient(t, k)
	defer c.Close()
	first, vals := readAll(t, c, 0)
	if first != 450 {
		t.Fatalf("after a clean stop partition 0 starts at %d, want 450", first)
	}
	wantRecords(t, 0, first, vals, 450, n)
}

package results_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"seckill/internal/testenv"
	"seckill/sale"
	"seckill/stock/results"
)

// TestWriteOnCluster: on a Redis Cluster a Write of final results stores
// every result (SKUs of slots of their own) and publishes their
// requestNos. One write used to put the PUBLISH (no key) in the same
// DoMulti as the results' keys of several slots, which rueidis refuses
// with a panic — the consumer died on its first batch (found by the
// fleet test, e2e/chaos TestFleet). A one-node cluster that serves every
// slot is enough to show it.
func TestWriteOnCluster(t *testing.T) {
	r := testenv.StartRedis(t, testenv.WithRedisArgs("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"))
	ctx := context.Background()
	if err := r.Do(t, "CLUSTER", "ADDSLOTSRANGE", "0", "16383").Error(); err != nil {
		t.Fatal(err)
	}
	testenv.EventuallyOK(t, "cluster_state:ok", 10*time.Second, func() error {
		s, err := r.Do(t, "CLUSTER", "INFO").ToString()
		if err == nil && !strings.Contains(s, "cluster_state:ok") {
			err = fmt.Errorf("not ok yet")
		}
		return err
	})
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{r.Addr}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if c.Mode() != rueidis.ClientModeCluster {
		t.Fatalf("client mode %v, want a cluster client", c.Mode())
	}
	sub, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{r.Addr}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sub.Close)
	got := make(chan string, 1)
	subCtx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	ready := make(chan struct{})
	go func() {
		_ = sub.Receive(subCtx, sub.B().Subscribe().Channel(results.Channel).Build(), func(m rueidis.PubSubMessage) {
			got <- m.Message
		})
	}()
	// The subscription is in place once PUBSUB NUMSUB counts it.
	go func() {
		for subCtx.Err() == nil {
			n, _ := r.Do(t, "PUBSUB", "NUMSUB", results.Channel).ToArray()
			if len(n) == 2 {
				if v, err := n[1].AsInt64(); err == nil && v == 1 {
					close(ready)
					return
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		t.Fatal("the subscription never showed up")
	}

	// Every SKU on the cluster; the SKUs' hash tags put their results in
	// slots of their own.
	st := results.New(c, func(int64, int64, int) rueidis.Client { return c }, time.Hour)
	var es []results.Entry
	var rns []string
	for i := range 8 {
		rn := fmt.Sprintf("1-%d-38546523261449%04d", 101+i, i)
		rns = append(rns, rn)
		es = append(es, results.Entry{RequestNo: rn, Activity: 1, SKU: int64(101 + i), Owner: int64(i + 1), State: sale.ResultSuccess, OrderNo: "O" + rn})
	}
	if err := st.Write(ctx, es...); err != nil {
		t.Fatal(err)
	}
	users := make([]int64, len(rns))
	for i, rn := range rns {
		users[i] = int64(i + 1)
		e, err := st.Read(ctx, users[i], rn)
		if err != nil || e.State != sale.ResultSuccess || e.OrderNo != "O"+rn || e.Owner != int64(i+1) {
			t.Errorf("%s: %+v %v", rn, e, err)
		}
	}
	// With the owners' records, in one call across the slots.
	many, err := st.ReadMany(ctx, rns, users)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range many {
		if e.State != sale.ResultSuccess || e.Owner != users[i] {
			t.Errorf("ReadMany %s: %+v", rns[i], e)
		}
	}
	select {
	case m := <-got:
		if m != strings.Join(rns, " ") {
			t.Errorf("published %q, want the requestNos %q", m, strings.Join(rns, " "))
		}
	case <-time.After(5 * time.Second):
		t.Error("no message on the results channel")
	}
}

package shard

import (
	"hash/fnv"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

func decodeRedis(t *testing.T, src string) Config {
	t.Helper()
	c := DefaultConfig()
	dec := yaml.NewDecoder(strings.NewReader(src))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		t.Fatalf("%q: %v", src, err)
	}
	return c
}

func TestHotTakesOneShardOrAList(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       [][]string
	}{
		{"one shard as before", "hot: {addrs: [h:1]}", [][]string{{"h:1"}}},
		{"one shard without addresses is none", "hot: {addrs: []}", nil},
		{"no hot key is none", "timeout: 1s", nil},
		{"an empty hot is none", "hot:", nil},
		{"a list of two", "hot: [{addrs: [h:1]}, {addrs: [h:2, h:3]}]", [][]string{{"h:1"}, {"h:2", "h:3"}}},
		{"a list of one", "hot:\n  - addrs: [h:1]\n    password: p\n", [][]string{{"h:1"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := decodeRedis(t, tc.yaml)
			if err := c.Validate(); err != nil {
				t.Fatal(err)
			}
			got := c.Hot.Shards()
			if len(got) != len(tc.want) {
				t.Fatalf("shards %+v, want %v", got, tc.want)
			}
			for i := range got {
				if strings.Join(got[i].Addrs, ",") != strings.Join(tc.want[i], ",") {
					t.Fatalf("shard %d: %v, want %v", i, got[i].Addrs, tc.want[i])
				}
			}
		})
	}
}

func TestHotRefusesWhatIsNotAShard(t *testing.T) {
	for _, src := range []string{"hot: h:1", "hot: [{addrs: [h:1]}, {addrs: []}]", "hot: [{addrs: [h:1]}, {addrs: [h:1]}]", "hot: {adrs: [h:1]}"} {
		c := DefaultConfig()
		dec := yaml.NewDecoder(strings.NewReader(src))
		dec.KnownFields(true)
		err := dec.Decode(&c)
		if err == nil {
			err = c.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), "hot") && !strings.Contains(err.Error(), "adrs") {
			t.Errorf("%q: %v, want an error naming redis.hot", src, err)
		}
	}
}

func TestHotFromTheEnvironment(t *testing.T) {
	h := HotShards{{Addrs: []string{"old:1"}, Password: "p0"}}
	env := map[string]string{"X_ADDRS": "a:1; b:1,b:2", "X_DB": "3"}
	if err := h.ApplyEnv("X", func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
		t.Fatal(err)
	}
	if len(h) != 2 || h[0].Addrs[0] != "a:1" || len(h[1].Addrs) != 2 || h[1].Addrs[1] != "b:2" ||
		h[0].Password != "p0" || h[0].DB != 3 || h[1].DB != 3 {
		t.Fatalf("%+v", h)
	}
}

// TestHotIndexIsFNV1a: the rule every process of a fleet (and any tool
// outside it) computes the same way: FNV-1a-32("<activity>:<sku>") mod n.
func TestHotIndexIsFNV1a(t *testing.T) {
	seen := map[int]int{}
	for sku := int64(1); sku <= 200; sku++ {
		f := fnv.New32a()
		f.Write([]byte("7:" + strconv.FormatInt(sku, 10)))
		want := int(f.Sum32() % 3)
		if got := HotIndex(7, sku, 3); got != want {
			t.Fatalf("sku %d: %d, want %d", sku, got, want)
		}
		seen[want]++
	}
	if len(seen) != 3 {
		t.Fatalf("200 SKUs over 3 shards landed on %v", seen)
	}
	if allocs := testing.AllocsPerRun(100, func() { HotIndex(1, 2, 2) }); allocs != 0 {
		t.Fatalf("HotIndex allocates %v times", allocs)
	}
}

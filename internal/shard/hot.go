package shard

import (
	"fmt"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// HotShards is redis.hot: the hot-SKU shards. The YAML takes one shard as
// a mapping (hot: {addrs: [...]}, as before there were several) or a list
// of them (hot: [{addrs: [...]}, {addrs: [...]}]). None, or one with empty
// addrs, means the hot SKUs live on redis.default.
//
// A hot SKU lives on hot shard sku.hotShard when the SKU names one, else
// on HotIndex(activity, sku, len): the placement never changes while the
// list does not, so every process of a fleet agrees on it without asking.
type HotShards []Redis

// UnmarshalYAML takes a mapping (one shard) or a sequence of mappings.
func (h *HotShards) UnmarshalYAML(n *yaml.Node) error {
	// Node.Decode does not inherit the decoder's KnownFields: check the
	// keys here, so a misspelt key fails as it does everywhere else.
	switch n.Kind {
	case yaml.MappingNode:
		if err := knownRedisKeys(n); err != nil {
			return err
		}
		var r Redis
		if err := n.Decode(&r); err != nil {
			return err
		}
		*h = HotShards{r}
		return nil
	case yaml.SequenceNode:
		for _, e := range n.Content {
			if e.Kind != yaml.MappingNode {
				return fmt.Errorf("line %d: each redis.hot shard must be a mapping ({addrs: [...]})", e.Line)
			}
			if err := knownRedisKeys(e); err != nil {
				return err
			}
		}
		var rs []Redis
		if err := n.Decode(&rs); err != nil {
			return err
		}
		*h = rs
		return nil
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			*h = nil
			return nil
		}
	}
	return fmt.Errorf("line %d: redis.hot must be one shard ({addrs: [...]}) or a list of shards", n.Line)
}

func knownRedisKeys(n *yaml.Node) error {
	for i := 0; i+1 < len(n.Content); i += 2 {
		switch k := n.Content[i]; k.Value {
		case "addrs", "username", "password", "db", "tls":
		default:
			return fmt.Errorf("line %d: field %s not found in a redis.hot shard", k.Line, k.Value)
		}
	}
	return nil
}

// Shards are the configured hot shards: none when redis.hot is empty or
// is one shard without addresses.
func (h HotShards) Shards() []Redis {
	if len(h) == 1 && len(h[0].Addrs) == 0 {
		return nil
	}
	return h
}

// ApplyEnv reads the hot shards' environment overrides (the config
// package calls it for redis.hot, a list its generic walk cannot name):
//
//	<prefix>_ADDRS     shards separated by ';', a shard's addresses by ','
//	                   ("h1:6379;h2:6379" is two shards, "a:1,b:2" one
//	                   cluster); it replaces the whole list
//	<prefix>_USERNAME  every hot shard's ACL user
//	<prefix>_PASSWORD  every hot shard's password
//	<prefix>_DB        every hot shard's database
//
// (A shard's TLS settings come from the file.)
func (h *HotShards) ApplyEnv(prefix string, lookup func(string) (string, bool)) error {
	if s, ok := lookup(prefix + "_ADDRS"); ok {
		var out HotShards
		for _, shard := range strings.Split(s, ";") {
			var addrs []string
			for _, a := range strings.Split(shard, ",") {
				if a = strings.TrimSpace(a); a != "" {
					addrs = append(addrs, a)
				}
			}
			if len(addrs) > 0 {
				out = append(out, Redis{Addrs: addrs})
			}
		}
		for i := range out {
			if i < len(*h) {
				out[i].Username, out[i].Password, out[i].DB, out[i].TLS = (*h)[i].Username, (*h)[i].Password, (*h)[i].DB, (*h)[i].TLS
			}
		}
		*h = out
	}
	if s, ok := lookup(prefix + "_USERNAME"); ok {
		for i := range *h {
			(*h)[i].Username = s
		}
	}
	if s, ok := lookup(prefix + "_PASSWORD"); ok {
		for i := range *h {
			(*h)[i].Password = s
		}
	}
	if s, ok := lookup(prefix + "_DB"); ok {
		db, err := strconv.Atoi(s)
		if err != nil {
			return fmt.Errorf("%s_DB=%q: %w", prefix, s, err)
		}
		for i := range *h {
			(*h)[i].DB = db
		}
	}
	return nil
}

// HotIndex is the placement rule of a hot SKU that names no shard:
// FNV-1a-32("<activity>:<sku>") mod n. n must be positive.
func HotIndex(activity, sku int64, n int) int {
	var b [42]byte
	buf := strconv.AppendInt(b[:0], activity, 10)
	buf = append(buf, ':')
	buf = strconv.AppendInt(buf, sku, 10)
	// FNV-1a 32 written out: hash/fnv's New32a escapes to the heap, and
	// this runs for every occupy batch.
	h := uint32(2166136261)
	for _, c := range buf {
		h ^= uint32(c)
		h *= 16777619
	}
	return int(h % uint32(n))
}

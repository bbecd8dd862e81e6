// Package blocklist holds the IP and user blocklists the edge checks before
// any other work. Entries come from the configuration (edge.blocklist) and
// from the admin API, which keeps them in two Redis sets on the default
// Redis and announces every change with a "blocklist" event on
// sale.EventsChannel. Each edge holds the union as an immutable Set behind
// an atomic pointer, so a lookup on the hot path takes no lock.
package blocklist

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"seckill/sale"
)

// Redis keys on the default Redis.
const (
	IPsKey   = "sk:block:ips"   // set of canonical addresses and CIDR prefixes
	UsersKey = "sk:block:users" // set of user ids (decimal)
)

// ErrBadEntry is returned for an entry that is not an IP address, a CIDR
// prefix or a positive user id.
var ErrBadEntry = errors.New("blocklist: bad entry")

// Set is an immutable blocklist snapshot: read it from any number of
// goroutines. A nil *Set blocks nothing.
type Set struct {
	addrs    map[netip.Addr]struct{}
	prefixes []netip.Prefix
	users    map[int64]struct{}
	ips      []string // canonical, sorted: for listings
}

// NewSet builds a set from IP entries (addresses or CIDR prefixes, see
// ParseIP) and user ids; the first bad entry is an error naming it.
func NewSet(ips []string, users []int64) (*Set, error) {
	s := &Set{addrs: map[netip.Addr]struct{}{}, users: map[int64]struct{}{}}
	seen := map[string]bool{}
	for _, e := range ips {
		c, err := ParseIP(e)
		if err != nil {
			return nil, err
		}
		if seen[c] {
			continue
		}
		seen[c] = true
		s.ips = append(s.ips, c)
		if p, err := netip.ParsePrefix(c); err == nil {
			s.prefixes = append(s.prefixes, p)
		} else {
			s.addrs[netip.MustParseAddr(c)] = struct{}{}
		}
	}
	for _, u := range users {
		if u <= 0 {
			return nil, fmt.Errorf("%w: user id %d must be positive", ErrBadEntry, u)
		}
		s.users[u] = struct{}{}
	}
	sort.Strings(s.ips)
	return s, nil
}

// ParseIP canonicalises an IP entry: an address ("203.0.113.7",
// "2001:db8::1"; an IPv4-mapped IPv6 address becomes IPv4) or a CIDR
// prefix ("10.0.0.0/8", masked to its network; a /32 or /128 prefix
// becomes its address). Zones are refused.
func ParseIP(s string) (string, error) {
	if p, err := netip.ParsePrefix(s); err == nil {
		a := p.Addr()
		bits := p.Bits()
		if a.Is4In6() && bits >= 96 {
			a, bits = a.Unmap(), bits-96
		}
		if bits == a.BitLen() {
			return a.String(), nil
		}
		p, err := a.Prefix(bits)
		if err != nil {
			return "", fmt.Errorf("%w: %q: %v", ErrBadEntry, s, err)
		}
		return p.String(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return "", fmt.Errorf("%w: %q is not an IP address or CIDR prefix", ErrBadEntry, s)
	}
	return a.Unmap().String(), nil
}

// IP reports whether a (unmapped by the caller) is blocked. No allocation.
func (s *Set) IP(a netip.Addr) bool {
	if s == nil {
		return false
	}
	if _, ok := s.addrs[a]; ok {
		return true
	}
	for _, p := range s.prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// User reports whether user is blocked. No allocation.
func (s *Set) User(user int64) bool {
	if s == nil {
		return false
	}
	_, ok := s.users[user]
	return ok
}

// Empty reports whether the set blocks nothing.
func (s *Set) Empty() bool { return s == nil || len(s.ips) == 0 && len(s.users) == 0 }

// IPs lists the IP entries, canonical and sorted.
func (s *Set) IPs() []string {
	if s == nil {
		return nil
	}
	return append([]string(nil), s.ips...)
}

// Users lists the user ids, sorted.
func (s *Set) Users() []int64 {
	if s == nil {
		return nil
	}
	out := make([]int64, 0, len(s.users))
	for u := range s.users {
		out = append(out, u)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Union returns a set holding the entries of both.
func (s *Set) Union(o *Set) *Set {
	u, _ := NewSet(append(s.IPs(), o.IPs()...), append(s.Users(), o.Users()...))
	return u
}

// Store keeps the admin API's entries in Redis and announces changes.
// Safe for concurrent use.
type Store struct {
	rdb rueidis.Client
}

// NewStore returns a store over the default Redis.
func NewStore(rdb rueidis.Client) *Store { return &Store{rdb: rdb} }

// AddIP blocks an IP entry (see ParseIP) and answers its canonical form and
// whether it was new.
func (st *Store) AddIP(ctx context.Context, entry string) (string, bool, error) {
	c, err := ParseIP(entry)
	if err != nil {
		return "", false, err
	}
	n, err := st.rdb.Do(ctx, st.rdb.B().Sadd().Key(IPsKey).Member(c).Build()).AsInt64()
	if err != nil {
		return c, false, fmt.Errorf("block ip %s: %w", c, err)
	}
	st.announce(ctx)
	return c, n == 1, nil
}

// RemoveIP unblocks an IP entry and answers its canonical form and whether
// it was there.
func (st *Store) RemoveIP(ctx context.Context, entry string) (string, bool, error) {
	c, err := ParseIP(entry)
	if err != nil {
		return "", false, err
	}
	n, err := st.rdb.Do(ctx, st.rdb.B().Srem().Key(IPsKey).Member(c).Build()).AsInt64()
	if err != nil {
		return c, false, fmt.Errorf("unblock ip %s: %w", c, err)
	}
	st.announce(ctx)
	return c, n == 1, nil
}

// AddUser blocks a user and answers whether the entry was new.
func (st *Store) AddUser(ctx context.Context, user int64) (bool, error) {
	if user <= 0 {
		return false, fmt.Errorf("%w: user id %d must be positive", ErrBadEntry, user)
	}
	n, err := st.rdb.Do(ctx, st.rdb.B().Sadd().Key(UsersKey).Member(strconv.FormatInt(user, 10)).Build()).AsInt64()
	if err != nil {
		return false, fmt.Errorf("block user %d: %w", user, err)
	}
	st.announce(ctx)
	return n == 1, nil
}

// RemoveUser unblocks a user and answers whether the entry was there.
func (st *Store) RemoveUser(ctx context.Context, user int64) (bool, error) {
	if user <= 0 {
		return false, fmt.Errorf("%w: user id %d must be positive", ErrBadEntry, user)
	}
	n, err := st.rdb.Do(ctx, st.rdb.B().Srem().Key(UsersKey).Member(strconv.FormatInt(user, 10)).Build()).AsInt64()
	if err != nil {
		return false, fmt.Errorf("unblock user %d: %w", user, err)
	}
	st.announce(ctx)
	return n == 1, nil
}

// Load reads both sets. Entries that do not parse (written by hand into
// Redis) are skipped and reported in bad, never fatal: one typo must not
// unblock everyone else.
func (st *Store) Load(ctx context.Context) (s *Set, bad []string, err error) {
	res := st.rdb.DoMulti(ctx,
		st.rdb.B().Smembers().Key(IPsKey).Build(),
		st.rdb.B().Smembers().Key(UsersKey).Build())
	rawIPs, err := res[0].AsStrSlice()
	if err != nil {
		return nil, nil, fmt.Errorf("blocklist %s: %w", IPsKey, err)
	}
	rawUsers, err := res[1].AsStrSlice()
	if err != nil {
		return nil, nil, fmt.Errorf("blocklist %s: %w", UsersKey, err)
	}
	ips := make([]string, 0, len(rawIPs))
	for _, e := range rawIPs {
		if _, err := ParseIP(e); err != nil {
			bad = append(bad, IPsKey+" "+e)
			continue
		}
		ips = append(ips, e)
	}
	users := make([]int64, 0, len(rawUsers))
	for _, e := range rawUsers {
		u, err := strconv.ParseInt(e, 10, 64)
		if err != nil || u <= 0 {
			bad = append(bad, UsersKey+" "+e)
			continue
		}
		users = append(users, u)
	}
	s, err = NewSet(ips, users)
	return s, bad, err
}

// announce tells every edge to reload. Best effort: an edge that misses it
// catches up at its next periodic refresh (edge.blocklist.refresh_interval).
func (st *Store) announce(ctx context.Context) {
	e := sale.Event{Kind: sale.EventBlocklist, At: time.Now().UnixNano()}
	_ = st.rdb.Do(ctx, st.rdb.B().Publish().Channel(sale.EventsChannel).Message(e.String()).Build()).Error()
}

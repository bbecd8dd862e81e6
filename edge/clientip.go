package edge

import (
	"net"
	"net/netip"

	"github.com/valyala/fasthttp"

	"seckill/internal/ratelimit"
)

// The client address is what the IP blocklist and the per-IP limit judge.
// X-Forwarded-For is a list every proxy appends its peer to, so only the
// entries appended by proxies we trust are facts; anything left of them was
// written by the client and may be forged. Hence: the peer unless it is a
// trusted proxy, else the right-most X-Forwarded-For entry that is not one.

// clientIP returns the request's client address, or the zero Addr when the
// connection has no IP peer (a unix socket, an in-memory test listener, a
// handler run without a connection): such requests skip the address checks.
// No allocation.
func (a *admission) clientIP(ctx *fasthttp.RequestCtx) netip.Addr {
	peer := peerAddr(ctx)
	if !peer.IsValid() || len(a.trusted) == 0 || !a.trustedProxy(peer) {
		return peer
	}
	client := peer
	// Several X-Forwarded-For lines read as one list, in order.
	hs := ctx.Request.Header.PeekAll(fasthttp.HeaderXForwardedFor)
	for i := len(hs) - 1; i >= 0; i-- {
		h := hs[i]
		for end := len(h); end >= 0; {
			start := lastComma(h[:end]) + 1
			hop, ok := parseAddr(trimSpace(h[start:end]))
			if !ok {
				// Not an address: nothing left of it can be trusted, and
				// the last trusted hop is all we know.
				return client
			}
			client = hop
			if !a.trustedProxy(hop) {
				return hop
			}
			end = start - 1
		}
	}
	// Every hop is a trusted proxy: the left-most is the closest we get.
	return client
}

func (a *admission) trustedProxy(ip netip.Addr) bool {
	for _, p := range a.trusted {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// peerAddr is the TCP peer's address, IPv4-mapped addresses unmapped; the
// zero Addr when there is no IP peer.
func peerAddr(ctx *fasthttp.RequestCtx) netip.Addr {
	ta, ok := ctx.RemoteAddr().(*net.TCPAddr)
	if !ok {
		return netip.Addr{}
	}
	a, ok := netip.AddrFromSlice(ta.IP)
	if !ok {
		return netip.Addr{}
	}
	a = a.Unmap()
	if a.IsUnspecified() {
		// fasthttp's stand-in when a handler runs without a connection.
		return netip.Addr{}
	}
	return a
}

// parseAddr parses an IPv4 or IPv6 address (no zone), unmapped; a port
// some proxies append ("203.0.113.7:5678", "[2001:db8::1]:5678") is
// dropped. Common IPv4 is parsed by hand: netip.ParseAddr wants a string,
// and converting the header bytes would allocate.
func parseAddr(b []byte) (netip.Addr, bool) {
	if a, ok := parseIPv4(b); ok {
		return a, true
	}
	if len(b) > 0 && b[0] == '[' {
		end := 0
		for i, c := range b {
			if c == ']' {
				end = i
				break
			}
		}
		if end == 0 || end+1 < len(b) && b[end+1] != ':' {
			return netip.Addr{}, false
		}
		b = b[1:end]
	} else if i := lastColon(b); i > 0 && countColons(b) == 1 {
		return parseIPv4(b[:i])
	}
	if len(b) == 0 || len(b) > 45 {
		return netip.Addr{}, false
	}
	var buf [45]byte
	n := copy(buf[:], b)
	for _, c := range buf[:n] {
		if c == '%' { // zones never come from a proxy
			return netip.Addr{}, false
		}
	}
	a, err := netip.ParseAddr(string(buf[:n]))
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

// parseIPv4 parses dotted-quad decimal (no leading zeros) without
// allocating.
func parseIPv4(b []byte) (netip.Addr, bool) {
	var ip [4]byte
	field, digits, v := 0, 0, 0
	for i := 0; i <= len(b); i++ {
		if i == len(b) || b[i] == '.' {
			if digits == 0 || field > 3 {
				return netip.Addr{}, false
			}
			ip[field] = byte(v)
			field, digits, v = field+1, 0, 0
			continue
		}
		c := b[i]
		if c < '0' || c > '9' || digits == 3 || digits > 0 && v == 0 {
			return netip.Addr{}, false
		}
		v = v*10 + int(c-'0')
		digits++
		if v > 255 {
			return netip.Addr{}, false
		}
	}
	if field != 4 {
		return netip.Addr{}, false
	}
	return netip.AddrFrom4(ip), true
}

func lastColon(b []byte) int {
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == ':' {
			return i
		}
	}
	return -1
}

func countColons(b []byte) int {
	n := 0
	for _, c := range b {
		if c == ':' {
			n++
		}
	}
	return n
}

func lastComma(b []byte) int {
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == ',' {
			return i
		}
	}
	return -1
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

// ipKey is the per-IP limiter's key: the address hashed, IPv6 clients by
// their /64 (one subscriber's allocation, which they may rotate freely).
// No allocation.
func ipKey(a netip.Addr) uint64 {
	if a.Is6() {
		a = netip.PrefixFrom(a, 64).Masked().Addr()
	}
	b := a.As16()
	return ratelimit.KeyString(b[:])
}

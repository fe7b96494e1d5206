package http

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// proxies decides which address a request came from. The TCP peer is the
// client unless it is one of http.trusted_proxies: then the client is the
// nearest address, walking the forwarding chain from the end, that is not
// a trusted proxy. The chain is read from the standard Forwarded header
// (RFC 7239) when the request has one, else from X-Forwarded-For. An
// untrusted peer's headers are ignored, so a client cannot choose its own
// address; a malformed chain falls back to the peer.
type proxies []netip.Prefix

func (p proxies) trusted(a netip.Addr) bool {
	a = a.Unmap()
	for _, pr := range p {
		if pr.Contains(a) {
			return true
		}
	}
	return false
}

// clientAddr returns the client's address as a string, for limits and
// logs.
func (p proxies) clientAddr(r *http.Request) string {
	if len(p) == 0 {
		// The peer, as net/http formats it: an IPv4 host is already
		// in its canonical form, and a substring of it costs nothing.
		if i := strings.LastIndexByte(r.RemoteAddr, ':'); i > 0 && strings.IndexByte(r.RemoteAddr[:i], ':') < 0 {
			return r.RemoteAddr[:i]
		}
	}
	peer, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		if err != nil {
			return r.RemoteAddr
		}
		return host
	}
	addr := peer.Addr().Unmap()
	if len(p) == 0 || !p.trusted(addr) {
		return addr.String()
	}
	chain, ok := forwardedChain(r)
	if !ok {
		return addr.String()
	}
	for i := len(chain) - 1; i >= 0; i-- {
		if !p.trusted(chain[i]) {
			return chain[i].String()
		}
	}
	if len(chain) > 0 {
		return chain[0].String()
	}
	return addr.String()
}

// forwardedChain returns the addresses a request was forwarded for, client
// first; ok is false when the header is malformed or names something that
// is not an address (an obfuscated identifier, "unknown").
func forwardedChain(r *http.Request) (chain []netip.Addr, ok bool) {
	if fwd := r.Header.Values("Forwarded"); len(fwd) > 0 {
		for _, line := range fwd {
			for _, elem := range strings.Split(line, ",") {
				for _, pair := range strings.Split(elem, ";") {
					k, v, found := strings.Cut(strings.TrimSpace(pair), "=")
					if !found || !strings.EqualFold(k, "for") {
						continue
					}
					a, ok := parseForwardedAddr(strings.Trim(v, `"`))
					if !ok {
						return nil, false
					}
					chain = append(chain, a)
				}
			}
		}
		return chain, len(chain) > 0
	}
	for _, line := range r.Header.Values("X-Forwarded-For") {
		for _, f := range strings.Split(line, ",") {
			a, ok := parseForwardedAddr(strings.TrimSpace(f))
			if !ok {
				return nil, false
			}
			chain = append(chain, a)
		}
	}
	return chain, len(chain) > 0
}

// parseForwardedAddr reads "192.0.2.1", "192.0.2.1:443", "2001:db8::1" or
// "[2001:db8::1]:443".
func parseForwardedAddr(s string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap(), true
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap(), true
	}
	if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		if a, err := netip.ParseAddr(s[1 : len(s)-1]); err == nil {
			return a.Unmap(), true
		}
	}
	return netip.Addr{}, false
}

// limiterKey is the key the bad-key limiter counts a client address under:
// an IPv4 address (an IPv4-mapped IPv6 one included) by itself, an IPv6
// address by its /64, since one host is commonly given a whole /64 and
// could otherwise use a new address per request.
func limiterKey(addr string) string {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return addr
	}
	a = a.Unmap().WithZone("")
	if a.Is4() {
		return a.String()
	}
	return netip.PrefixFrom(a, 64).Masked().String()
}

package http

import (
	"net"
	"net/http"
	"net/netip"
	"strings"

	"demosvc/config"
)

// proxies decides which address a request came from. The TCP peer is the
// client unless it is one of http.trusted_proxies: then the client is the
// nearest address, walking the forwarding chain from the end, that is not
// a trusted proxy. The chain is read from the one header
// http.client_ip_header names, X-Forwarded-For or the standard Forwarded
// (RFC 7239), never from the other: a proxy passes the header it does not
// set through from the client as it came. An untrusted peer's headers are
// ignored, so a client cannot choose its own address; a malformed chain
// falls back to the peer.
type proxies struct {
	prefixes  []netip.Prefix
	forwarded bool // the chain is in Forwarded, not X-Forwarded-For
	// fromNode, on a cluster node, reports whether another node forwarded
	// the request (its signed marker, forwardedByANode): that node is
	// then trusted as a proxy, whether or not http.trusted_proxies lists
	// it, so that the client it forwarded for is the one counted and
	// logged, not the node.
	fromNode func(*http.Request) bool
}

func newProxies(c *config.Config) proxies {
	prefixes, _ := c.TrustedProxyPrefixes() // validated by config
	return proxies{prefixes: prefixes, forwarded: c.HTTP.ClientIPHeader == config.ClientIPForwarded}
}

func (p proxies) trusted(a netip.Addr) bool {
	a = a.Unmap()
	for _, pr := range p.prefixes {
		if pr.Contains(a) {
			return true
		}
	}
	return false
}

// clientAddr returns the client's address as a string, for limits and
// logs.
func (p proxies) clientAddr(r *http.Request) string {
	viaNode := p.fromNode != nil && p.fromNode(r)
	if len(p.prefixes) == 0 && !viaNode {
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
	if !viaNode && !p.trusted(addr) {
		return addr.String()
	}
	// From the nearest hop back: the first that is not a trusted proxy
	// is the client. What is left of it, the client wrote itself (a
	// proxy appends to the header it was sent), and is never read. A hop
	// a trusted proxy wrote that is not an address (an obfuscated
	// identifier, "unknown", a zone) leaves the peer as the client.
	hops := p.chain(r)
	for i := len(hops) - 1; i >= 0; i-- {
		a, ok := parseForwardedAddr(hops[i])
		if !ok {
			break
		}
		if !p.trusted(a) || i == 0 {
			return a.String() // every hop trusted: the first one
		}
	}
	return addr.String()
}

// chain returns the hops a request was forwarded for, client first, as
// written.
func (p proxies) chain(r *http.Request) (hops []string) {
	if p.forwarded {
		for _, line := range r.Header.Values("Forwarded") {
			for _, elem := range strings.Split(line, ",") {
				for _, pair := range strings.Split(elem, ";") {
					k, v, found := strings.Cut(strings.TrimSpace(pair), "=")
					if found && strings.EqualFold(k, "for") {
						hops = append(hops, strings.Trim(v, `"`))
					}
				}
			}
		}
		return hops
	}
	for _, line := range r.Header.Values("X-Forwarded-For") {
		for _, f := range strings.Split(line, ",") {
			hops = append(hops, strings.TrimSpace(f))
		}
	}
	return hops
}

// parseForwardedAddr reads "192.0.2.1", "192.0.2.1:443", "2001:db8::1" or
// "[2001:db8::1]:443". A zone is refused: it names an interface of the
// proxy's host, not a client, and would carry any text a client chose
// into the logs and the dashboard's records.
func parseForwardedAddr(s string) (netip.Addr, bool) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		ap, perr := netip.ParseAddrPort(s)
		if perr == nil {
			a, err = ap.Addr(), nil
		} else if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
			a, err = netip.ParseAddr(s[1 : len(s)-1])
		}
	}
	if err != nil || a.Zone() != "" {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

// LimiterKey is the key the bad-key limiter and the dashboard's sign-in
// limit count a client address under:
// an IPv4 address (an IPv4-mapped IPv6 one included) by itself, an IPv6
// address by its /64, since one host is commonly given a whole /64 and
// could otherwise use a new address per request.
func LimiterKey(addr string) string {
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

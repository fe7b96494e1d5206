package netguard

import "net/netip"

// special4 are the IPv4 ranges no webhook may reach: every entry of the
// IANA IPv4 Special-Purpose Address Registry (those marked globally
// reachable too: they are anycast services, never a receiver), multicast,
// and the reserved block.
var special4 = prefixes(
	"0.0.0.0/8",       // "this network" (RFC 791), 0.0.0.0/32 "this host" in it
	"10.0.0.0/8",      // private use (RFC 1918)
	"100.64.0.0/10",   // shared address space, CGNAT (RFC 6598)
	"127.0.0.0/8",     // loopback
	"169.254.0.0/16",  // link local, the cloud metadata address among them
	"172.16.0.0/12",   // private use
	"192.0.0.0/24",    // IETF protocol assignments: DS-Lite, PCP and TURN anycast, NAT64 discovery
	"192.0.2.0/24",    // documentation, TEST-NET-1 (RFC 5737)
	"192.31.196.0/24", // AS112-v4 (RFC 7535)
	"192.52.193.0/24", // AMT (RFC 7450)
	"192.88.99.0/24",  // 6to4 relay anycast, deprecated (RFC 7526)
	"192.168.0.0/16",  // private use
	"192.175.48.0/24", // AS112 direct delegation (RFC 7534)
	"198.18.0.0/15",   // benchmarking (RFC 2544)
	"198.51.100.0/24", // documentation, TEST-NET-2
	"203.0.113.0/24",  // documentation, TEST-NET-3
	"224.0.0.0/4",     // multicast
	"240.0.0.0/4",     // reserved (RFC 1112), 255.255.255.255 limited broadcast in it
)

// globalUnicast6 is the only IPv6 space allocated for global unicast
// (IANA IPv6 Address Space): everything outside it is loopback,
// unspecified, embedded IPv4, discard, translation, link or site local,
// unique local, multicast, segment routing or reserved by the IETF.
var globalUnicast6 = netip.MustParsePrefix("2000::/3")

// special6 are the entries of the IANA IPv6 Special-Purpose Address
// Registry inside 2000::/3. Those outside it (::1/128, ::/128,
// ::ffff:0:0/96, 64:ff9b::/96, 64:ff9b:1::/48, 100::/64, 100:0:0:1::/64,
// 5f00::/16, fc00::/7, fe80::/10) are refused by the rule above.
var special6 = prefixes(
	"2001::/23",         // IETF protocol assignments: Teredo 2001::/32, PCP/TURN/DNS-SD anycast, benchmarking 2001:2::/48, AMT 2001:3::/32, AS112-v6 2001:4:112::/48, ORCHID 2001:10::/28, ORCHIDv2 2001:20::/28, drone remote ID 2001:30::/28
	"2001:db8::/32",     // documentation (RFC 3849)
	"2002::/16",         // 6to4 (RFC 3056)
	"2620:4f:8000::/48", // AS112 direct delegation (RFC 7534)
	"3fff::/20",         // documentation (RFC 9637)
)

// Embedded-IPv4 forms of IPv6: the address is judged by the IPv4 address
// in its last 32 bits, which is where a packet to it may end up.
var (
	compatible6 = netip.MustParsePrefix("::/96")           // IPv4-compatible, deprecated (RFC 4291)
	translated6 = netip.MustParsePrefix("::ffff:0:0:0/96") // IPv4-translated (RFC 2765)
)

func prefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

// Public reports whether a webhook delivery may reach addr when private
// networks are not allowed: a unicast address outside every IANA
// special-purpose range (see special4 and special6), inside 2000::/3 for
// IPv6. An IPv4-mapped (::ffff:a.b.c.d) or IPv4-translated
// (::ffff:0:a.b.c.d) address is judged by its IPv4 address; the deprecated
// IPv4-compatible form (::a.b.c.d, RFC 4291) and the other forms that embed
// one (NAT64, 6to4, Teredo) are not public, since where they lead depends
// on a stack or translator that may read them as something else. A zone is
// ignored.
func Public(addr netip.Addr) bool {
	if !addr.IsValid() {
		return false
	}
	addr = addr.WithZone("")
	if addr.Is4In6() {
		return public4(addr.Unmap())
	}
	if addr.Is4() {
		return public4(addr)
	}
	if compatible6.Contains(addr) {
		return false
	}
	if v4, ok := embedded4(addr); ok {
		return public4(v4)
	}
	if !globalUnicast6.Contains(addr) {
		return false
	}
	return !inAny(special6, addr)
}

func public4(addr netip.Addr) bool { return !inAny(special4, addr) }

// embedded4 returns the IPv4 address in an IPv4-translated IPv6 address.
func embedded4(addr netip.Addr) (netip.Addr, bool) {
	if !translated6.Contains(addr) {
		return netip.Addr{}, false
	}
	b := addr.As16()
	return netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}), true
}

func inAny(ps []netip.Prefix, addr netip.Addr) bool {
	for _, p := range ps {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

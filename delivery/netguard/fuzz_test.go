package netguard

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"testing"
)

// FuzzCheckURL checks the URL policy against an oracle written apart from
// it: whatever CheckURL accepts is an http(s) URL whose host no resolver
// reads as an address other than the one checked, and that address is
// public unless private networks are allowed. Its seed corpus is in
// testdata/fuzz/FuzzCheckURL; run it longer with
// go test -run '^$' -fuzz FuzzCheckURL -fuzztime 5m ./delivery/netguard
func FuzzCheckURL(f *testing.F) {
	for _, seed := range []string{"https://hooks.example.com/x", "http://127.1/", "http://[::ffff:7f00:1]/", "http://0x7f.0.0.1/"} {
		f.Add(seed, false)
	}
	f.Fuzz(func(t *testing.T, raw string, allowPrivate bool) {
		err := CheckURL(raw, allowPrivate)
		errAllowed := CheckURL(raw, true)
		switch {
		case err == nil && errAllowed != nil:
			t.Fatalf("%q: accepted without private networks, refused with them: %v", raw, errAllowed)
		case err != nil && errAllowed == nil && !errors.Is(err, ErrNotPublic):
			t.Fatalf("%q: refused only without private networks, but not as not public: %v", raw, err)
		case err != nil && err.Error() == "":
			t.Fatalf("%q: refused without a reason", raw)
		case err == nil:
			if v := violation(raw, allowPrivate); v != nil {
				t.Fatalf("%q (allowPrivate=%v) accepted: %v", raw, allowPrivate, v)
			}
		}
	})
}

// violation says what is wrong with accepting raw, by rules written apart
// from CheckURL's; nil when nothing is.
func violation(raw string, allowPrivate bool) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("does not parse: %v", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.User != nil {
		return fmt.Errorf("scheme %q, user %v", u.Scheme, u.User)
	}
	host := u.Hostname()
	if host == "" || strings.ContainsAny(host, "%") {
		return fmt.Errorf("host %q", host)
	}
	for _, r := range host {
		if r >= 0x80 {
			return fmt.Errorf("host %q is not ASCII", host)
		}
	}
	if strings.HasSuffix(host, ".") {
		return fmt.Errorf("host %q ends in a dot", host)
	}
	// The only numeric spelling accepted is the canonical one: a resolver
	// reading the name as inet_aton does finds the address checked.
	if a, ok := inetAton(host); ok && a.String() != host {
		return fmt.Errorf("host %q is %s to inet_aton", host, a)
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		if !allowPrivate && (strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost")) {
			return fmt.Errorf("host %q is loopback", host)
		}
		return nil
	}
	if addr.String() != host {
		return fmt.Errorf("host %q is not written canonically (%s)", host, addr)
	}
	if !allowPrivate && obviouslyNotPublic(addr) {
		return fmt.Errorf("host %s is not public", addr)
	}
	return nil
}

// inetAton reads host as the URL standard's IPv4 parser and inet_aton do:
// 1 to 4 dot-separated numbers, each decimal, octal (a leading 0) or hex
// (0x), the last filling the bytes left.
func inetAton(host string) (netip.Addr, bool) {
	parts := strings.Split(host, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	var nums []uint64
	for _, p := range parts {
		base, digits := 10, p
		switch {
		case len(p) >= 2 && (p[:2] == "0x" || p[:2] == "0X"):
			base, digits = 16, p[2:]
			if digits == "" {
				digits = "0"
			}
		case len(p) > 1 && p[0] == '0':
			base, digits = 8, p[1:]
		}
		if digits == "" || strings.ContainsAny(digits, "+-_") {
			return netip.Addr{}, false
		}
		n, err := strconv.ParseUint(digits, base, 32)
		if err != nil {
			return netip.Addr{}, false
		}
		nums = append(nums, n)
	}
	var v uint64
	for i, n := range nums {
		if i < len(nums)-1 {
			if n > 255 {
				return netip.Addr{}, false
			}
			v |= n << (8 * (3 - i))
			continue
		}
		if n >= 1<<(8*(4-i)) {
			return netip.Addr{}, false
		}
		v |= n
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

// obviouslyNotPublic is a coarse second opinion from the standard
// library's predicates and a few well-known blocks, not from Public's
// table.
func obviouslyNotPublic(a netip.Addr) bool {
	a = a.Unmap()
	if a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() ||
		a.IsInterfaceLocalMulticast() || a.IsMulticast() || a.IsUnspecified() {
		return true
	}
	for _, p := range []string{"0.0.0.0/8", "100.64.0.0/10", "192.0.0.0/24", "192.0.2.0/24", "198.18.0.0/15",
		"198.51.100.0/24", "203.0.113.0/24", "240.0.0.0/4", "2001:db8::/32", "3fff::/20", "64:ff9b::/96", "2002::/16", "::/96"} {
		if netip.MustParsePrefix(p).Contains(a) {
			return true
		}
	}
	return false
}

// The oracle can fail: what a lax policy would let through, it flags.
func TestFuzzOracleFlagsWhatALaxPolicyWouldAccept(t *testing.T) {
	for _, raw := range []string{
		"http://127.1/", "http://2130706433/", "http://0177.0.0.1/", "http://0x7f.0.0.1/", "http://1.2.3.4./",
		"http://127.0.0.1/", "http://[::1]/", "http://[::ffff:127.0.0.1]/", "http://[2001:db8::1]/", "http://198.51.100.1/",
		"http://[::FFFF:8.8.8.8]/", "http://localhost/", "http://１.example/", "ftp://example.com/",
	} {
		if violation(raw, false) == nil {
			t.Errorf("the oracle lets %q through", raw)
		}
	}
	for _, raw := range []string{"https://hooks.example.com/x", "https://8.8.8.8/", "https://[2606:4700:4700::1111]/"} {
		if v := violation(raw, false); v != nil {
			t.Errorf("the oracle flags %q: %v", raw, v)
		}
	}
}

// Package netguard is the public-address policy of outbound webhooks (the
// SSRF guard): which addresses a delivery may reach, and which URL hosts a
// webhook registration may name. Registration, `log import` and the
// delivery dialer all use it, and it imports nothing from demosvc, so there
// is one copy of the rules.
//
// Two checks, because a name is resolved only when a delivery is sent:
//   - at registration, CheckURL refuses a host that is not written in one
//     canonical form (so that no resolver reads it as an address other
//     than the one checked) and a literal address that is not Public;
//   - at dial time, the address a name resolved to must be Public.
package netguard

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strings"
)

// ErrNotPublic is wrapped by every refusal of an address (or of a name
// that always means loopback) that is not public.
var ErrNotPublic = errors.New("not a public address")

// ErrNotCanonical is wrapped by every refusal of a host written in a form
// that is not canonical.
var ErrNotCanonical = errors.New("not a canonical host")

// refusal is an error whose message is written for a person and which
// wraps one of the sentinels above.
type refusal struct {
	msg  string
	kind error
}

func (r *refusal) Error() string { return r.msg }
func (r *refusal) Unwrap() error { return r.kind }

func refuse(kind error, format string, args ...any) error {
	return &refusal{msg: fmt.Sprintf(format, args...), kind: kind}
}

// CheckURL checks a webhook URL: an absolute http or https URL without
// credentials, whose host is written canonically, and, unless
// allowPrivate, is not a literal address that is not Public nor a
// localhost name. A canonical host is either
//   - an IPv4 address in dotted decimal, four parts, no leading zeros
//     (127.0.0.1; not 127.1, 2130706433, 0177.0.0.1 or 0x7f.0.0.1);
//   - an IPv6 address in brackets, in its RFC 5952 form, without a zone
//     ([2001:db8::1]; not [2001:DB8:0::1] or [fe80::1%25eth0]);
//   - a DNS name of ASCII letters, digits and hyphens, without a trailing
//     dot, whose last label is not a number (which resolvers would read
//     as an IPv4 address).
//
// Any error wraps ErrNotPublic or ErrNotCanonical, or reports a URL that
// is not an absolute http(s) URL.
func CheckURL(raw string, allowPrivate bool) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "" {
		return errors.New("must be an absolute http or https URL")
	}
	if u.User != nil {
		return errors.New("must not carry credentials")
	}
	// url.Parse decodes percent-escapes in the host: check what was
	// written, not what it decoded to.
	if strings.Contains(authority(raw), "%") {
		return refuse(ErrNotCanonical, "the URL's host must not be percent-encoded nor carry an IPv6 zone")
	}
	host := u.Hostname()
	bracketed := strings.HasPrefix(u.Host, "[")
	addr, isAddr, err := canonicalHost(host, bracketed)
	if err != nil {
		return err
	}
	if allowPrivate {
		return nil
	}
	if isAddr && !Public(addr) {
		return refuse(ErrNotPublic, "the URL's host %s is not a public address", addr)
	}
	if name := strings.ToLower(host); !isAddr && (name == "localhost" || strings.HasSuffix(name, ".localhost")) {
		return refuse(ErrNotPublic, "the URL's host %s is not a public address: localhost names are loopback (RFC 6761)", host)
	}
	return nil
}

// authority is the part of an absolute URL between "//" and the path,
// query or fragment, as written.
func authority(raw string) string {
	_, rest, ok := strings.Cut(raw, "//")
	if !ok {
		return ""
	}
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		rest = rest[:i]
	}
	return rest
}

// maxNameBytes and maxLabelBytes are DNS's limits (RFC 1035).
const (
	maxNameBytes  = 253
	maxLabelBytes = 63
)

// canonicalHost checks that host (without port or brackets) is written
// canonically, and returns its address when it is a literal one.
func canonicalHost(host string, bracketed bool) (netip.Addr, bool, error) {
	if host == "" {
		return netip.Addr{}, false, refuse(ErrNotCanonical, "the URL must name a host")
	}
	for i := 0; i < len(host); i++ {
		if host[i] >= 0x80 {
			return netip.Addr{}, false, refuse(ErrNotCanonical,
				"the URL's host must be ASCII: write an internationalised name in its xn-- form, and digits as 0-9")
		}
	}
	if addr, err := netip.ParseAddr(host); err == nil {
		switch {
		case bracketed != addr.Is6():
			return netip.Addr{}, false, refuse(ErrNotCanonical, "the URL's host %s must be written %s", host, literal(addr.WithZone("")))
		case addr.Zone() != "" || addr.String() != host:
			return netip.Addr{}, false, refuse(ErrNotCanonical, "the URL's host %s is not in canonical form; write it %s", literal(addr), literal(addr.WithZone("")))
		}
		return addr, true, nil
	}
	if bracketed {
		return netip.Addr{}, false, refuse(ErrNotCanonical, "the URL's host [%s] is not an IPv6 address", host)
	}
	if strings.HasSuffix(host, ".") {
		return netip.Addr{}, false, refuse(ErrNotCanonical, "the URL's host %s must not end in a dot", host)
	}
	if len(host) > maxNameBytes {
		return netip.Addr{}, false, refuse(ErrNotCanonical, "the URL's host must be at most %d bytes", maxNameBytes)
	}
	labels := strings.Split(host, ".")
	for _, l := range labels {
		if !ldhLabel(l) {
			return netip.Addr{}, false, refuse(ErrNotCanonical,
				"the URL's host %s is not a host name: labels of 1 to 63 letters, digits and inner hyphens, separated by single dots", host)
		}
	}
	if numeric(labels[len(labels)-1]) {
		return netip.Addr{}, false, refuse(ErrNotCanonical,
			"the URL's host %s reads as a number, which resolvers take for an IPv4 address; write an address as four decimal parts such as 192.0.2.1", host)
	}
	return netip.Addr{}, false, nil
}

// literal is how addr is written as a URL's host.
func literal(addr netip.Addr) string {
	if addr.Is6() {
		return "[" + addr.String() + "]"
	}
	return addr.String()
}

// ldhLabel reports whether l is a DNS label of letters, digits and
// hyphens, neither starting nor ending with a hyphen (RFC 1123).
func ldhLabel(l string) bool {
	if l == "" || len(l) > maxLabelBytes || l[0] == '-' || l[len(l)-1] == '-' {
		return false
	}
	for i := 0; i < len(l); i++ {
		c := l[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// numeric reports whether a host's last label reads as a number to the
// URL standard and to inet_aton: decimal digits (octal with a leading 0
// among them), or 0x followed by hex digits.
func numeric(l string) bool {
	if len(l) >= 2 && l[0] == '0' && (l[1] == 'x' || l[1] == 'X') {
		for i := 2; i < len(l); i++ {
			if !isHex(l[i]) {
				return false
			}
		}
		return true
	}
	for i := 0; i < len(l); i++ {
		if l[i] < '0' || l[i] > '9' {
			return false
		}
	}
	return true
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

package netguard

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

// Refusal is tested at registration only: nothing here dials anything.

func TestPublic(t *testing.T) {
	notPublic := []string{
		// IPv4 special-purpose registry, first, inner and last addresses.
		"0.0.0.0", "0.1.2.3", "0.255.255.255",
		"10.0.0.0", "10.255.255.255",
		"100.64.0.0", "100.64.0.1", "100.127.255.255",
		"127.0.0.1", "127.255.255.255",
		"169.254.0.0", "169.254.169.254", "169.254.255.255",
		"172.16.0.0", "172.31.255.255",
		"192.0.0.0", "192.0.0.8", "192.0.0.9", "192.0.0.10", "192.0.0.170", "192.0.0.171", "192.0.0.255",
		"192.0.2.0", "192.0.2.1", "192.0.2.255",
		"192.31.196.1", "192.52.193.1", "192.88.99.1", "192.175.48.1",
		"192.168.0.0", "192.168.255.255",
		"198.18.0.0", "198.19.255.255",
		"198.51.100.0", "198.51.100.255",
		"203.0.113.0", "203.0.113.255",
		"224.0.0.1", "239.255.255.255",
		"240.0.0.0", "250.1.2.3", "255.255.255.254", "255.255.255.255",
		// IPv6 special-purpose registry.
		"::", "::1",
		"100::", "100::ffff:ffff:ffff:ffff", "100:0:0:1::1",
		"64:ff9b::808:808", "64:ff9b::a00:1", "64:ff9b:1::1",
		"2001::1", "2001:0:4136:e378:8000:63bf:3fff:fdd2", // Teredo
		"2001:1::1", "2001:1::2", "2001:1::3",
		"2001:2::1", "2001:2:0:ffff::1", // benchmarking
		"2001:3::1", "2001:4:112::1", // AMT, AS112-v6
		"2001:10::1", "2001:20::1", "2001:2f:ffff::1", "2001:30::1", // ORCHID, ORCHIDv2, drone ID
		"2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff", // end of 2001::/23
		"2001:db8::", "2001:db8:ffff::1",
		"2002::1", "2002:808:808::1", "2002:7f00:1::1", // 6to4
		"2620:4f:8000::1",
		"3fff::", "3fff:fff:ffff::1",
		"5f00::1",
		"fc00::1", "fd00::1", "fdff:ffff::1",
		"fe80::1", "febf::1", "fec0::1",
		"ff02::1", "ff0e::1",
		"4000::1", "8000::1", "1::1", // reserved, outside 2000::/3
		// Embedded IPv4, judged by the IPv4 address.
		"::ffff:127.0.0.1", "::ffff:10.0.0.1", "::ffff:169.254.169.254", "::ffff:0.0.0.0", "::ffff:255.255.255.255",
		"::7f00:1", "::a00:1", "::c000:201", // IPv4-compatible 127.0.0.1, 10.0.0.1, 192.0.2.1
		"::808:808", "::100:0", // IPv4-compatible 8.8.8.8, 1.0.0.0: deprecated, refused whatever they embed
		"::ffff:0:7f00:1", "::ffff:0:a9fe:a9fe", "::ffff:0:c633:6401", // IPv4-translated 127.0.0.1, 169.254.169.254, 198.51.100.1
	}
	public := []string{
		"8.8.8.8", "1.1.1.1", "93.184.216.34",
		// Just outside the ranges.
		"9.255.255.255", "11.0.0.0", "100.63.255.255", "100.128.0.0", "126.255.255.255", "128.0.0.0",
		"169.253.255.255", "169.255.0.0", "172.15.255.255", "172.32.0.0",
		"191.255.255.255", "192.0.1.255", "192.0.3.0", "192.88.98.255", "192.88.100.0", "192.167.255.255", "192.169.0.0",
		"198.17.255.255", "198.20.0.0", "198.51.99.255", "198.51.101.0", "203.0.112.255", "203.0.114.0", "223.255.255.255",
		"2606:4700:4700::1111", "2001:4860:4860::8888", "2606:2800:220:1:248:1893:25c8:1946",
		"2001:200::1", "2001:db7:ffff::1", "2001:db9::1", "2003::1", "2620:4f:8001::1", "3ffe::1", "3fff:1000::1",
		"::ffff:8.8.8.8", "::ffff:0:808:808",
		"2a00:1450:4001:80b::200e",
	}
	for _, s := range notPublic {
		if Public(netip.MustParseAddr(s)) {
			t.Errorf("Public(%s) = true, want false", s)
		}
	}
	for _, s := range public {
		if !Public(netip.MustParseAddr(s)) {
			t.Errorf("Public(%s) = false, want true", s)
		}
	}
	if Public(netip.Addr{}) {
		t.Error("the zero Addr is public")
	}
	if Public(netip.MustParseAddr("fe80::1%eth0")) || !Public(netip.MustParseAddr("2001:4860:4860::8888%eth0")) {
		t.Error("a zone changed the verdict")
	}
}

func TestCheckURLRefusesHostsThatAreNotCanonical(t *testing.T) {
	for _, tc := range []struct{ url, msg string }{
		{"http://127.1/x", "reads as a number"},
		{"http://2130706433/x", "reads as a number"},
		{"http://0x7f000001/x", "reads as a number"},
		{"http://0177.0.0.1/x", "reads as a number"},
		{"http://0x7f.0.0.1/x", "reads as a number"},
		{"http://127.0.0.01/x", "reads as a number"},
		{"http://1.2.3.4.5/x", "reads as a number"},
		{"http://8.8.8.010/x", "reads as a number"},
		{"http://example.123/x", "reads as a number"},
		{"http://example.0x1F/x", "reads as a number"},
		{"http://example.0x/x", "reads as a number"},
		{"http://127.0.0.1./x", "must not end in a dot"},
		{"http://example.com./x", "must not end in a dot"},
		{"http://example.com../x", "must not end in a dot"},
		{"http://１２７.0.0.1/x", "must be ASCII"},
		{"http://127.0.0.１/x", "must be ASCII"},
		{"http://٣.example/x", "must be ASCII"},
		{"http://bücher.example/x", "must be ASCII"},
		{"http://[fe80::1%25eth0]/x", "IPv6 zone"},
		{"http://[::FFFF:127.0.0.1]/x", "write it [::ffff:127.0.0.1]"},
		{"http://[0:0:0:0:0:0:0:1]/x", "write it [::1]"},
		{"http://[2001:DB8::1]/x", "write it [2001:db8::1]"},
		{"http://[2606:4700:4700:0::1111]/x", "write it [2606:4700:4700::1111]"},
		{"http://[::ffff:808:808]/x", "write it [::ffff:8.8.8.8]"},
		{"http://a..b/x", "is not a host name"},
		{"http://-a.example/x", "is not a host name"},
		{"http://a-.example/x", "is not a host name"},
		{"http://exa_mple.com/x", "is not a host name"},
		{"http://" + strings.Repeat("a", 64) + ".example/x", "is not a host name"},
		{"http://" + strings.Repeat("a.", 127) + "ab/x", "at most 253 bytes"},
	} {
		for _, allowPrivate := range []bool{false, true} {
			err := CheckURL(tc.url, allowPrivate)
			if !errors.Is(err, ErrNotCanonical) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("CheckURL(%q, allowPrivate=%v) = %v, want a refusal saying %q", tc.url, allowPrivate, err, tc.msg)
			}
		}
	}
}

func TestCheckURLRefusesAddressesThatAreNotPublic(t *testing.T) {
	for _, u := range []string{
		"http://127.0.0.1:9/x", "https://10.0.0.1/", "http://169.254.169.254/latest", "http://100.64.1.1/",
		"http://192.0.2.1/", "http://198.51.100.7/", "http://203.0.113.9/", "http://198.18.0.1/", "http://240.0.0.1/",
		"http://255.255.255.255/", "http://0.0.0.0/", "http://192.0.0.9/", "http://192.88.99.1/",
		"http://[::1]/", "http://[::]/", "http://[fd00::1]/", "http://[fe80::1]/", "http://[ff02::1]/",
		"http://[2001:db8::1]/", "http://[3fff::1]/", "http://[2001:2::1]/", "http://[100::1]/",
		"http://[64:ff9b::a00:1]/", "http://[64:ff9b:1::1]/", "http://[2001::1]/", "http://[2001:20::1]/",
		"http://[2002:a00:1::]/", "http://[::ffff:127.0.0.1]/", "http://[::7f00:1]/", "http://[::ffff:0:7f00:1]/",
		"http://localhost/x", "http://LOCALHOST:8080/x", "http://hooks.localhost/x",
	} {
		err := CheckURL(u, false)
		if !errors.Is(err, ErrNotPublic) || !strings.Contains(err.Error(), "is not a public address") {
			t.Errorf("CheckURL(%q) = %v, want a refusal: not a public address", u, err)
		}
		if err := CheckURL(u, true); err != nil {
			t.Errorf("CheckURL(%q) with private networks allowed = %v", u, err)
		}
	}
}

func TestCheckURLAccepts(t *testing.T) {
	for _, u := range []string{
		"https://hooks.example.com/demo", "http://Hooks.Example.COM:8080/a?b=1#c", "https://8.8.8.8/x",
		"https://[2606:4700:4700::1111]:8443/", "https://[::ffff:8.8.8.8]/", "https://xn--bcher-kva.example/",
		"http://0x7f.example.com/", "https://1password.com/", "https://a.b-c.d1/", "https://example/",
	} {
		if err := CheckURL(u, false); err != nil {
			t.Errorf("CheckURL(%q) = %v, want nil", u, err)
		}
	}
}

func TestCheckURLRefusesWhatIsNotAnHTTPURL(t *testing.T) {
	for _, u := range []string{"", "ftp://example.com/", "//example.com/", "http:example.com", "http:///x", "mailto:a@example.com",
		"http://user:pw@example.com/", "http://exa mple.com/",
		// url.Parse refuses these already; they stay refused whatever it does.
		"http://%31%32%37.0.0.1/x", "http://exa%6dple.com/x", "http://[127.0.0.1]/x"} {
		if err := CheckURL(u, true); err == nil {
			t.Errorf("CheckURL(%q) accepted", u)
		}
	}
}

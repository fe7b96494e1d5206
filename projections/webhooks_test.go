package projections

import (
	"net/netip"
	"testing"
)

func TestPublicAddrRefusesEveryNonPublicRange(t *testing.T) {
	for addr, public := range map[string]bool{
		"93.184.216.34": true, "2606:2800:220:1:248:1893:25c8:1946": true, "8.8.8.8": true,
		"127.0.0.1": false, "::1": false, "10.1.2.3": false, "172.16.0.1": false, "192.168.1.1": false,
		"169.254.169.254": false, "fe80::1": false, "fd00::1": false, "100.64.0.1": false, "0.0.0.0": false,
		"0.1.2.3": false, "192.0.0.8": false, "198.18.0.1": false, "224.0.0.1": false, "ff02::1": false,
		"::": false, "64:ff9b::a00:1": false, "2002:a00:1::": false, "::ffff:127.0.0.1": false,
	} {
		if got := PublicAddr(netip.MustParseAddr(addr)); got != public {
			t.Errorf("PublicAddr(%s) = %v, want %v", addr, got, public)
		}
	}
}

package delivery

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"time"

	"demosvc/delivery/netguard"
)

// ErrRefusedAddress reports a delivery refused because the address dialled
// is not public and private networks are not allowed.
var ErrRefusedAddress = errors.New("refused: not a public address")

// newTransport returns the HTTP transport of deliveries. The SSRF guard
// checks the address actually dialled, after name resolution, against
// netguard.Public, so a name that resolves to a private address is refused
// as a literal one is at registration. A round trip follows no redirect:
// a 3xx is a failed delivery.
func newTransport(allowPrivate bool, timeout time.Duration) *transport {
	dialer := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
	if !allowPrivate {
		dialer.Control = func(network, address string, _ syscall.RawConn) error {
			host, _, err := net.SplitHostPort(address)
			if err != nil {
				return err
			}
			if addr, err := netip.ParseAddr(host); err != nil || !netguard.Public(addr) {
				return fmt.Errorf("%w: %s (delivery.allow_private_networks is false)", ErrRefusedAddress, host)
			}
			return nil
		}
	}
	return &transport{
		dial: dialer.DialContext,
		tls:  &tls.Config{MinVersion: tls.VersionTLS12, ClientSessionCache: tls.NewLRUClientSessionCache(0)},
		// Many webhooks may share a host, each with up to
		// delivery.concurrency attempts: keep their connections.
		maxIdle:     1024,
		idleTimeout: 90 * time.Second,
	}
}

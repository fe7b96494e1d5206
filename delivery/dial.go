package delivery

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
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
func newTransport(allowPrivate bool, timeout time.Duration) *http.Transport {
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
	return &http.Transport{
		Proxy:       nil, // never through a proxy from the environment
		DialContext: func(ctx context.Context, n, a string) (net.Conn, error) { return dialer.DialContext(ctx, n, a) },
		// Many webhooks may share a host, each with up to
		// delivery.concurrency attempts: keep their connections.
		MaxIdleConnsPerHost: 1024,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: timeout,
		// No ResponseHeaderTimeout: each attempt's context ends the
		// whole exchange after delivery.timeout, never later.
		ForceAttemptHTTP2: true,
		// No Accept-Encoding: a receiver's answer is read for its status
		// and its first 4 KiB, kept as sent, and the receiver parses one
		// header less.
		DisableCompression: true,
	}
}

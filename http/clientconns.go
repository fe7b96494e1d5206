package http

import (
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"
)

// LimitPerClient returns a listener that accepts at most max connections
// open at once from one client address (an IPv6 client's /64), and closes
// one past it as it accepts it, before a byte of it is read. Without it,
// one address could hold every connection http.max_connections allows,
// idle keep-alives or headers sent a byte at a time, each costing up to a
// few hundred KiB while its header block is read: a client that needs no
// key could keep the service from everyone and grow its memory by
// gigabytes. Addresses in exempt (http.trusted_proxies: a proxy carries
// many clients) are not counted. max 0 returns ln.
func LimitPerClient(ln net.Listener, max int, exempt []netip.Prefix, logger *slog.Logger) net.Listener {
	if max <= 0 {
		return ln
	}
	return &perClient{Listener: ln, max: max, exempt: exempt, logger: logger, open: map[netip.Prefix]int{},
		refusals: &logThrottle{interval: 10 * time.Second}}
}

type perClient struct {
	net.Listener
	max      int
	exempt   []netip.Prefix
	logger   *slog.Logger
	refusals *logThrottle

	mu   sync.Mutex
	open map[netip.Prefix]int // connections open by client; no entry at 0
}

func (l *perClient) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		key, counted := l.client(c.RemoteAddr())
		if !counted {
			return c, nil
		}
		l.mu.Lock()
		n := l.open[key]
		if n >= l.max {
			l.mu.Unlock()
			c.Close()
			if ok, dropped := l.refusals.allow(time.Now()); ok {
				l.logger.Warn("connection refused: its client address has http.max_connections_per_client open",
					"client", key.String(), "max_connections_per_client", l.max, "refusals_not_logged", dropped)
			}
			continue
		}
		l.open[key] = n + 1
		l.mu.Unlock()
		return &clientConn{Conn: c, release: func() { l.release(key) }}, nil
	}
}

// client returns the key c's address is counted under, and false for an
// address that is not counted (exempt, or not IP).
func (l *perClient) client(a net.Addr) (netip.Prefix, bool) {
	tcp, ok := a.(*net.TCPAddr)
	if !ok {
		return netip.Prefix{}, false
	}
	ip, ok := netip.AddrFromSlice(tcp.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	ip = ip.Unmap()
	for _, p := range l.exempt {
		if p.Contains(ip) {
			return netip.Prefix{}, false
		}
	}
	bits := 32
	if ip.Is6() {
		bits = 64
	}
	key, _ := ip.Prefix(bits)
	return key, true
}

func (l *perClient) release(key netip.Prefix) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[key] <= 1 {
		delete(l.open, key)
	} else {
		l.open[key]--
	}
}

// clientConn gives its client's place back when it is closed, once.
type clientConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *clientConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

package http

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"
)

// TestOneClientHoldsAtMostItsShareOfConnections: past
// http.max_connections_per_client, a client's next connection is closed
// as it is accepted; one of its connections closing makes room; a trusted
// proxy is not limited.
func TestOneClientHoldsAtMostItsShareOfConnections(t *testing.T) {
	accepting := func(t *testing.T, exempt []netip.Prefix) (addr string, accepted <-chan net.Conn) {
		raw, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ln := LimitPerClient(raw, 2, exempt, slog.New(slog.DiscardHandler))
		t.Cleanup(func() { ln.Close() })
		ch := make(chan net.Conn, 8)
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				t.Cleanup(func() { c.Close() })
				ch <- c
			}
		}()
		return raw.Addr().String(), ch
	}
	dial := func(t *testing.T, addr string) net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	// closedByServer says whether the server closed c: a read ends at EOF.
	closedByServer := func(c net.Conn) bool {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, err := c.Read(make([]byte, 1))
		return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)
	}

	t.Run("limited", func(t *testing.T) {
		addr, accepted := accepting(t, nil)
		dial(t, addr)
		dial(t, addr)
		first := waitFor(t, accepted, "the first connection")
		waitFor(t, accepted, "the second connection")
		third := dial(t, addr)
		if !closedByServer(third) {
			t.Fatal("a third connection from one address was not closed")
		}
		first.Close() // the server's side: the client's place is free again
		dial(t, addr)
		// Only a connection Accept returns reaches the channel: one closed
		// as accepted never does.
		waitFor(t, accepted, "a connection once one of the two closed")
	})
	t.Run("a trusted proxy is not limited", func(t *testing.T) {
		addr, accepted := accepting(t, []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")})
		for i := range 4 {
			dial(t, addr)
			waitFor(t, accepted, "connection "+string(rune('1'+i)))
		}
	})
}

// waitFor returns what ch yields, failing t after 30 s.
func waitFor[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

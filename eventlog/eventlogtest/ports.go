package eventlogtest

import (
	"net"
	"testing"
)

// FreeAddrs returns n distinct loopback addresses ("127.0.0.1:port")
// nobody listens on at the moment, for the nodes of a test cluster. The
// listeners stay open until all n are chosen: closed one by one, the
// kernel may hand the same port out twice (CI once saw a node's API port
// given to another node's NATS clients). Another process may still take
// one before the test listens on it.
func FreeAddrs(t testing.TB, n int) []string {
	t.Helper()
	addrs := make([]string, n)
	for i := range addrs {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		addrs[i] = ln.Addr().String()
	}
	return addrs
}

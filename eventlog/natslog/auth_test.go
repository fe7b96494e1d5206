package natslog

import (
	"bufio"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"demosvc/eventlog/eventlogtest"
)

// The NATS server carries the whole log and the leases that say which
// node takes writes: it takes no client from outside unless told to, and
// then only with the token, and no route without the nodes' password.
func TestTheServerTakesNoClientOrRouteWithoutItsSecret(t *testing.T) {
	routes := eventlogtest.FreeAddrs(t, 2)
	srv, err := StartServer(ServerConfig{Cluster: "t", Node: "a", Listen: routes[0], Routes: routes,
		RoutePassword: "the-nodes-route-password", DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	// With no cluster.client_listen, the client port the server needs to
	// route takes no client: its token is random.
	refusesClientsWithout(t, srv.ClientURL(), "")
	// A server that does not know the password is refused as a route.
	for _, pass := range []string{"", "wrong"} {
		conn, err := net.DialTimeout("tcp", srv.ClusterAddr().String(), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		r := bufio.NewReader(conn)
		if info, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(info, "INFO ") {
			t.Fatalf("the route port's greeting: %q, %v", info, err)
		}
		conn.Write([]byte(`CONNECT {"user":"` + RouteUser + `","pass":"` + pass + `","verbose":false,"pedantic":false,"tls_required":false,"name":"rogue","cluster":"t"}` + "\r\nPING\r\n"))
		var got []string
		for {
			line, err := r.ReadString('\n')
			got = append(got, strings.TrimSpace(line))
			if err != nil || strings.HasPrefix(line, "-ERR") || strings.HasPrefix(line, "PONG") {
				break
			}
		}
		conn.Close()
		if last := got[len(got)-1]; !strings.Contains(last, "Authorization Violation") {
			t.Errorf("a route with password %q was answered %q, want an authorization violation", pass, got)
		}
	}

	// With a client listener, a client needs the token.
	const token = "a-client-token-of-at-least-32-chars"
	withClients, err := StartServer(ServerConfig{Cluster: "t", Node: "b", Listen: "127.0.0.1:-1",
		ClientListen: "127.0.0.1:-1", ClientToken: token, DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(withClients.Shutdown)
	refusesClientsWithout(t, withClients.ClientURL(), token)

	// Routes without a password are refused at start.
	if _, err := StartServer(ServerConfig{Cluster: "t", Node: "d", Listen: "127.0.0.1:-1", Routes: []string{"127.0.0.1:1"},
		DataDir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "routes need a password") {
		t.Errorf("routes with no password: %v, want a refusal", err)
	}
	// A client listener without a token is refused at start.
	if _, err := StartServer(ServerConfig{Cluster: "t", Node: "c", Listen: "127.0.0.1:-1", ClientListen: "127.0.0.1:-1",
		DataDir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "cluster.client_token") {
		t.Errorf("a client listener with no token: %v, want a refusal naming cluster.client_token", err)
	}
}

// refusesClientsWithout checks that the server at url refuses a NATS
// client with no token and with a wrong one, and, if token is given,
// takes one with it.
func refusesClientsWithout(t *testing.T, url, token string) {
	t.Helper()
	for _, opt := range []nats.Option{nil, nats.Token("wrong")} {
		opts := []nats.Option{nats.Timeout(5 * time.Second)}
		if opt != nil {
			opts = append(opts, opt)
		}
		if nc, err := nats.Connect(url, opts...); err == nil {
			nc.Close()
			t.Errorf("a NATS client without the right token was let in at %s", url)
		} else if !strings.Contains(strings.ToLower(err.Error()), "authorization violation") {
			t.Errorf("a client without the right token: %v, want an authorization violation", err)
		}
	}
	if token == "" {
		return
	}
	nc, err := nats.Connect(url, nats.Token(token), nats.Timeout(5*time.Second))
	if err != nil {
		t.Fatalf("a client with the token: %v", err)
	}
	nc.Close()
}

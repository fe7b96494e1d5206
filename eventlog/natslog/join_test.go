package natslog

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"demosvc/eventlog"
	"demosvc/eventlog/eventlogtest"
)

// waitUntil polls cond until it holds, failing the test after limit.
func waitUntil(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %v", what, limit)
		}
		time.Sleep(20 * time.Millisecond) // polling interval
	}
}

// threeServers configures a node on an embedded server for each name,
// routed to each other, three replicas of everything, a lease TTL of 1 s.
func threeServers(t *testing.T, names []string) []Config {
	routes := eventlogtest.FreeAddrs(t, len(names))
	cfgs := make([]Config, len(names))
	for i, name := range names {
		cfgs[i] = Config{Replicas: 3, LeaseTTL: time.Second, Server: &ServerConfig{Cluster: "t", Node: name,
			Listen: routes[i], Routes: routes, RoutePassword: "route-secret", DataDir: t.TempDir()}}
	}
	return cfgs
}

// threeServerContext skips a test of three NATS servers in -short, and
// gives it 150 s.
func threeServerContext(t *testing.T) context.Context {
	t.Helper()
	if testing.Short() {
		t.Skip("three NATS servers: not in -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// nodeSlots holds n nodes a test opens and closes: those open at its end
// are closed.
func nodeSlots(t *testing.T, n int) []*Node {
	nodes := make([]*Node, n)
	t.Cleanup(func() {
		for _, n := range nodes {
			if n != nil {
				n.Close()
			}
		}
	})
	return nodes
}

// openTogether opens nodes[i] on cfgs[i] for each i of which, all at
// once: each Open waits for a quorum.
func openTogether(t *testing.T, ctx context.Context, cfgs []Config, nodes []*Node, which ...int) {
	t.Helper()
	errs := make([]error, len(cfgs))
	var wg sync.WaitGroup
	for _, i := range which {
		wg.Add(1)
		go func() { defer wg.Done(); nodes[i], errs[i] = Open(ctx, cfgs[i]) }()
	}
	wg.Wait()
	for _, i := range which {
		if errs[i] != nil {
			t.Fatalf("opening node %d: %v", i, errs[i])
		}
	}
}

// A node restarted with an empty data dir adds nothing to a NATS quorum
// until it has caught up, and Joined says when it has; it stays nil once
// it was, and from then on the cluster can lose another node: the two left
// hold the stream and the lease bucket, so a node takes the writer lease
// and appends. A server stopped in-process hands its leaderships over
// first, so this test cannot show a crash before the fresh node joined
// (which leaves no writer until the dead node comes back):
// TestClusterFailover kills processes for that, and waits for /readyz,
// which waits for Joined, before each kill.
func TestJoinedAfterARestartWithAnEmptyDir(t *testing.T) {
	ctx := threeServerContext(t)
	names := []string{"a", "b", "c"}
	cfgs := threeServers(t, names)
	nodes := nodeSlots(t, len(names))
	open := func(which ...int) { t.Helper(); openTogether(t, ctx, cfgs, nodes, which...) }
	poll := func(what string, cond func() bool) { t.Helper(); waitUntil(t, 60*time.Second, what, cond) }
	open(0, 1, 2)
	appended := 0
	poll("five entries appended", func() bool {
		if _, err := nodes[0].appendFence(ctx); err == nil {
			appended++
		}
		return appended == 5
	})

	// c comes back with an empty data dir, and joins.
	nodes[2].Close()
	nodes[2] = nil
	if err := os.RemoveAll(cfgs[2].Server.DataDir); err != nil {
		t.Fatal(err)
	}
	// Back with another cluster.replicas, c is refused, and the cluster
	// keeps its three copies.
	wrong := cfgs[2]
	wrong.Replicas = 1
	if n, err := Open(ctx, wrong); err == nil || !strings.Contains(err.Error(), "keeps 3 copies, but this node's cluster.replicas is 1") {
		if n != nil {
			n.Close()
		}
		t.Fatalf("a node asking for 1 replica of a stream of 3: %v; want it refused", err)
	}
	for _, name := range []string{StreamName, "KV_" + LeaseBucket} {
		st, err := nodes[0].js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if got := st.CachedInfo().Config.Replicas; got != 3 {
			t.Fatalf("%s after a node asked for 1 replica: %d replicas, want 3", name, got)
		}
	}
	if err := os.RemoveAll(cfgs[2].Server.DataDir); err != nil {
		t.Fatal(err)
	}
	open(2)
	poll("c joined", func() bool { return nodes[2].Joined() == nil })

	// Stop the stream's leader (a or b): the other and c elect new ones.
	info, err := nodes[2].stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	victim := 0
	if info.Cluster != nil && info.Cluster.Leader == "b" {
		victim = 1
	}
	nodes[victim].Close()
	nodes[victim] = nil
	if err := nodes[2].Joined(); err != nil {
		t.Errorf("Joined once joined, while a peer's leaders are re-elected: %v", err)
	}
	start := time.Now()
	poll("a writer among the two left", func() bool {
		for i, n := range nodes {
			if n == nil {
				continue
			}
			if held, _ := n.writer.try(ctx, names[i], names[i]+":1"); !held {
				continue
			}
			_, err := n.appendFence(ctx)
			return err == nil
		}
		return false
	})
	t.Logf("%s stopped; a node of the two left took the writer lease and appended after %v", names[victim], time.Since(start))
}

// A node of three embedded servers left alone (the other two stopped, as a
// partition leaves it) says it is out of touch: no write of its goes
// through, though its own server still answers a lease read from its copy
// of the bucket, and a stream's info.
func TestANodeLeftAloneIsOutOfTouch(t *testing.T) {
	ctx := threeServerContext(t)
	names := []string{"a", "b", "c"}
	cfgs := threeServers(t, names)
	nodes := nodeSlots(t, len(names))
	openTogether(t, ctx, cfgs, nodes, 0, 1, 2)
	c := nodes[2]
	store, err := eventlog.OpenStore(t.TempDir(), eventlog.StoreOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	log, err := eventlog.OpenLog(store, eventlog.Options{Registry: eventlog.NewRegistry(), IDs: eventlog.NewIDs(time.Now), Replicator: c})
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	rctx, stop := context.WithCancel(ctx)
	var running sync.WaitGroup
	running.Add(2)
	go func() { defer running.Done(); c.Run(rctx, Roles{Node: "c", Addr: "c:1", Log: log}) }()
	go func() {
		defer running.Done()
		c.Follow(rctx, log, func(uint64, []byte) error { return nil })
	}()
	defer func() { stop(); running.Wait() }()
	if err := c.InTouch(); err != nil {
		t.Fatalf("c with its peers: %v", err)
	}
	nodes[0].Close()
	nodes[1].Close()
	nodes[0], nodes[1] = nil, nil
	waitUntil(t, 60*time.Second, "c to say it is out of touch", func() bool { return c.InTouch() != nil })
}

// A node back from a partition of its NATS server reads the head it must
// apply before it serves again from the stream's leader, not from its own
// server's copy, which answers stream info from what it held when it was
// cut off until it hears of the leader elected meanwhile (found by
// review: the gate let it serve at once, 2 runs in 3). Three servers
// whose routes go through relays; c's are cut, and c applies nothing
// until it follows again.
func TestANodeBackFromAPartitionReadsTheLeadersHead(t *testing.T) {
	ctx := threeServerContext(t)
	names := []string{"a", "b", "c"}
	routes := eventlogtest.FreeAddrs(t, 3)
	relays := make([][]*relay, 3) // relays[i][j]: i's route to j
	for i := range relays {
		relays[i] = make([]*relay, 3)
		for j := range relays[i] {
			if i != j {
				relays[i][j] = newRelay(t, routes[j])
			}
		}
	}
	srvs := make([]*server.Server, 3)
	for i, name := range names {
		host, port, _ := splitHostPort(routes[i])
		var via []string
		for j := range names {
			if j != i {
				via = append(via, "nats://"+relays[i][j].addr)
			}
		}
		opts := &server.Options{ServerName: name, JetStream: true, StoreDir: filepath.Join(t.TempDir(), "js"),
			Host: "127.0.0.1", Port: server.RANDOM_PORT, Authorization: testToken, NoSigs: true,
			// An address nothing listens on: gossip would route around the relays.
			Cluster: server.ClusterOpts{Name: "t", Host: host, Port: port, Advertise: "127.0.0.1:1"},
			Routes:  server.RoutesFromStr(strings.Join(via, ","))}
		s, err := server.NewServer(opts)
		if err != nil {
			t.Fatal(err)
		}
		s.Start()
		if !s.ReadyForConnections(10 * time.Second) {
			t.Fatalf("server %s not ready", name)
		}
		srvs[i] = s
		t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	}
	// Each Open waits for a quorum: start them together.
	opened := make([]chan *replica, 3)
	for _, i := range []int{0, 2} {
		opened[i] = make(chan *replica, 1)
		go func() {
			opened[i] <- newReplica(t, ctx, names[i], Config{NATSURL: withToken(srvs[i].ClientURL()), Replicas: 3, LeaseTTL: time.Second})
		}()
	}
	a, c := <-opened[0], <-opened[2]
	go a.node.Run(ctx, a.roles)
	waitUntil(t, 60*time.Second, "a to be the writer", func() bool { return a.node.IsWriter() })
	go c.node.Run(ctx, c.roles)
	write := func(k byte) {
		waitUntil(t, 60*time.Second, "a write of state", func() bool {
			return a.log.WriteSync([]eventlog.Put{{Key: []byte{eventlog.KeyspaceDelivery, k}, Value: []byte("1")}}, nil, nil) == nil
		})
	}
	write('1')
	waitUntil(t, 30*time.Second, "c to apply it", func() bool { return c.log.ReplPos() == a.log.ReplPos() })

	c.pause()
	cut := func(cut bool) {
		for _, p := range [][2]int{{0, 2}, {1, 2}, {2, 0}, {2, 1}} {
			if cut {
				relays[p[0]][p[1]].cut()
			} else {
				relays[p[0]][p[1]].restore()
			}
		}
	}
	cut(true)
	for k := byte('2'); k < '5'; k++ {
		write(k)
	}
	head := a.log.ReplPos()
	waitUntil(t, 60*time.Second, "c out of touch", func() bool { return c.node.InTouch() != nil })
	cut(false)
	waitUntil(t, 60*time.Second, "c to read the head back in touch", func() bool {
		return c.node.silence() == nil && c.node.rejoin.Load() != unknownHead
	})
	if got := c.node.rejoin.Load(); got < head {
		t.Errorf("c read the head at %d back in touch; a wrote up to %d", got, head)
	}
	if err := c.node.InTouch(); err == nil {
		t.Errorf("c in touch at position %d, short of %d", c.log.ReplPos(), head)
	}
	c.follow()
	waitUntil(t, 60*time.Second, "c in touch again", func() bool { return c.node.InTouch() == nil })
	if pos := c.log.ReplPos(); pos < head {
		t.Errorf("c in touch again at position %d, short of %d", pos, head)
	}
}

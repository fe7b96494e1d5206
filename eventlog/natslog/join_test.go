package natslog

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

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
	if testing.Short() {
		t.Skip("three NATS servers: not in -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	names := []string{"a", "b", "c"}
	routes := eventlogtest.FreeAddrs(t, len(names))
	cfgs := make([]Config, len(names))
	for i, name := range names {
		cfgs[i] = Config{Replicas: 3, LeaseTTL: time.Second, Server: &ServerConfig{Cluster: "t", Node: name,
			Listen: routes[i], Routes: routes, RoutePassword: "route-secret", DataDir: t.TempDir()}}
	}
	nodes := make([]*Node, len(names))
	defer func() {
		for _, n := range nodes {
			if n != nil {
				n.Close()
			}
		}
	}()
	// Each Open waits for a quorum: start them together.
	open := func(which ...int) {
		t.Helper()
		errs := make([]error, len(names))
		var wg sync.WaitGroup
		for _, i := range which {
			wg.Add(1)
			go func() { defer wg.Done(); nodes[i], errs[i] = Open(ctx, cfgs[i]) }()
		}
		wg.Wait()
		for _, i := range which {
			if errs[i] != nil {
				t.Fatalf("opening %s: %v", names[i], errs[i])
			}
		}
	}
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

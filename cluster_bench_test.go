package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// loadWrites sends total session-creating writes from 16 clients spread
// over the nodes, and returns writes per second and the latencies of the
// acknowledged ones.
func loadWrites(tb testing.TB, c *procCluster, agent string, total int) (float64, []time.Duration) {
	var next atomic.Int64
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	start := time.Now()
	for cl := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			node := cl % len(c.nodes)
			for {
				n := next.Add(1)
				if n > int64(total) {
					return
				}
				t0 := time.Now()
				status, body, _, err := c.do(node, http.MethodPost, "/v1/sessions",
					fmt.Sprintf(`{"agent_id":"%s","contact":{"name":"P","email":"b%d@example.com"}}`, agent, n))
				if err != nil || status != http.StatusCreated {
					tb.Errorf("write %d on node %d: %d %s %v", n, node, status, body, err)
					return
				}
				mu.Lock()
				lat = append(lat, time.Since(t0))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return float64(len(lat)) / time.Since(start).Seconds(), lat
}

// smallBench reports CI's run of every benchmark once with small sizes
// (DEMOSVC_BENCH_SESSIONS below the default): the cluster benchmarks then
// take 200 writes and 2 failovers instead of 2,000 and 10.
func smallBench() bool {
	n, err := strconv.Atoi(os.Getenv("DEMOSVC_BENCH_SESSIONS"))
	return err == nil && n < 1000000
}

func p99(lat []time.Duration) time.Duration {
	slices.Sort(lat)
	if len(lat) == 0 {
		return 0
	}
	return lat[len(lat)*99/100]
}

// benchAgent creates an agent through every node in turn and returns the
// last one's id: until a node has seen the writer's lease it answers 503
// without forwarding, which a client retries, so the load that follows
// measures writes and not an election still settling.
func benchAgent(tb testing.TB, c *procCluster) string {
	var status int
	var body []byte
	var err error
	for i := range c.nodes {
		c.poll(fmt.Sprintf("a first write through node %d", i), 60*time.Second, func() bool {
			status, body, _, err = c.do(i, http.MethodPost, "/v1/agents", `{"name":"A","sandbox_url":"https://sandbox.example.com/a"}`)
			return err != nil || status != http.StatusServiceUnavailable
		})
		if err != nil || status != http.StatusCreated {
			tb.Fatalf("agent through node %d: %d %s %v", i, status, body, err)
		}
	}
	var a struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(body, &a)
	return a.ID
}

// BenchmarkClusterWrites: writes/s and p99 latency of the same load (16
// clients, 2,000 writes) on a single node and through a three-node
// cluster (clients spread over the nodes, so two thirds of the writes are
// forwarded), both on this machine in one run. Run with -benchtime=1x:
// each iteration starts four processes.
func BenchmarkClusterWrites(b *testing.B) {
	total := 2000
	if smallBench() {
		total = 200
	}
	for range b.N {
		single := startProcs(b, 1, false)
		sRate, sLat := loadWrites(b, single, benchAgent(b, single), total)
		for i := range single.nodes {
			single.kill(i)
		}
		cluster := startProcs(b, 3, true)
		cRate, cLat := loadWrites(b, cluster, benchAgent(b, cluster), total)
		b.ReportMetric(sRate, "single_writes/s")
		b.ReportMetric(cRate, "cluster_writes/s")
		b.ReportMetric(cRate/sRate, "cluster/single_rate")
		b.ReportMetric(float64(p99(sLat).Microseconds())/1000, "single_p99_ms")
		b.ReportMetric(float64(p99(cLat).Microseconds())/1000, "cluster_p99_ms")
		b.ReportMetric(float64(p99(cLat))/float64(p99(sLat)), "cluster/single_p99")
	}
}

// BenchmarkClusterFailover: ten times, the writer is killed (SIGKILL)
// while 16 clients write through all nodes; the time from the kill to the
// first acknowledged write sent after it, reported against the lease TTL (3s) measured
// in the same run. The killed node is restarted before the next run.
func BenchmarkClusterFailover(b *testing.B) {
	runs := 10
	if smallBench() {
		runs = 2
	}
	const ttl = 3 * time.Second
	for range b.N {
		c := newProcCluster(b)
		w := c.startWriters(benchAgent(b, c))
		var times []time.Duration
		for range runs {
			victim := c.waitHolder("writer", -1)
			n := w.count()
			c.poll("writes before the kill", 60*time.Second, func() bool { return w.count() >= n+10 })
			killed := time.Now()
			c.kill(victim)
			var first time.Time
			c.poll("a write sent after the kill acknowledged", 90*time.Second, func() bool {
				var ok bool
				first, ok = w.firstSentAfter(killed)
				return ok
			})
			times = append(times, first.Sub(killed))
			c.start(victim)
			c.waitReady(victim)
		}
		close(w.stop)
		w.wg.Wait()
		slices.Sort(times)
		b.Logf("failover times: %v", times)
		b.ReportMetric(float64(times[len(times)/2].Milliseconds()), "median_failover_ms")
		b.ReportMetric(float64(times[len(times)-1].Milliseconds()), "max_failover_ms")
		b.ReportMetric(float64(times[len(times)/2])/float64(ttl), "median/lease_ttl")
	}
}

// BenchmarkClusterDeliveries: the same load as BenchmarkClusterWrites
// with one webhook on contact.created (a receiver on 127.0.0.1), on a
// single node and on a three-node cluster in one run: writes/s while
// delivering, and deliveries/s from the first write to the last delivery
// received. On a cluster every step of the webhook's loop (new deliveries
// with the cursor, or a batch of outcomes) is an append to the stream,
// serialized with the API's writes on the writer.
func BenchmarkClusterDeliveries(b *testing.B) {
	total := 2000
	if smallBench() {
		total = 200
	}
	for range b.N {
		var writes, deliveries [2]float64
		for i, clustered := range []bool{false, true} {
			c := startProcs(b, map[bool]int{false: 1, true: 3}[clustered], clustered)
			agent := benchAgent(b, c)
			hook := &receiver{}
			srv := httptest.NewServer(hook)
			status, body, _, err := c.do(0, http.MethodPost, "/v1/webhooks", `{"url":"`+srv.URL+`/hook","events":["contact.created"]}`)
			if err != nil || status != http.StatusCreated {
				b.Fatalf("webhook: %d %s %v", status, body, err)
			}
			start := time.Now()
			writes[i], _ = loadWrites(b, c, agent, total)
			c.poll("every contact delivered", 5*time.Minute, func() bool { return hook.count() >= total })
			deliveries[i] = float64(total) / time.Since(start).Seconds()
			for n := range c.nodes {
				c.kill(n)
			}
			srv.Close()
		}
		b.ReportMetric(writes[0], "single_writes/s")
		b.ReportMetric(writes[1], "cluster_writes/s")
		b.ReportMetric(deliveries[0], "single_deliveries/s")
		b.ReportMetric(deliveries[1], "cluster_deliveries/s")
		b.ReportMetric(deliveries[1]/deliveries[0], "cluster/single_deliveries")
	}
}

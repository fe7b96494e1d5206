package main

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"demosvc/eventlog/eventlogtest"
)

// The cluster tests run three real `demosvc serve` processes (this test
// binary, as testscript puts it on $PATH under the name demosvc) on
// 127.0.0.1, each with its own data dir, API port and NATS ports.

// procCluster is a three-node cluster of processes.
type procCluster struct {
	t      testing.TB
	bin    string
	env    []string
	routes string
	nodes  []*procNode
	key    string
	client *http.Client
}

type procNode struct {
	name, dir, api, route string
	cmd                   *exec.Cmd
	exited                chan struct{}
}

// newProcCluster starts three nodes and waits until each is ready and one
// of them has bootstrapped the log and printed the API key.
func newProcCluster(t testing.TB, extraEnv ...string) *procCluster {
	return startProcs(t, 3, true, extraEnv...)
}

// startProcs starts n nodes, clustered or (n = 1) a single node.
func startProcs(t testing.TB, nodes int, clustered bool, extraEnv ...string) *procCluster {
	if testing.Short() {
		t.Skip("three processes and a NATS cluster: not in -short")
	}
	bin, err := exec.LookPath("demosvc")
	if err != nil {
		t.Fatalf("the demosvc command (this test binary, via testscript) is not on $PATH: %v", err)
	}
	c := &procCluster{t: t, bin: bin, client: &http.Client{Timeout: 20 * time.Second}}
	base := t.TempDir()
	var routes []string
	ports := eventlogtest.FreeAddrs(t, 2*nodes)
	for i := range nodes {
		n := &procNode{name: fmt.Sprintf("n%d", i+1), dir: filepath.Join(base, fmt.Sprintf("n%d", i+1)),
			api: ports[2*i], route: ports[2*i+1]}
		routes = append(routes, n.route)
		c.nodes = append(c.nodes, n)
	}
	c.routes = strings.Join(routes, ",")
	c.env = append([]string{
		"DEMOSVC_DASHBOARD_ENABLED=false", "DEMOSVC_CLUSTER_ENABLED=" + fmt.Sprint(clustered), "DEMOSVC_CLUSTER_ROUTES=" + c.routes,
		"DEMOSVC_CLUSTER_LEASE_TTL=3s", "DEMOSVC_CLUSTER_READ_WAIT=20s", "DEMOSVC_PLANS_PRO=1000000",
		"DEMOSVC_DELIVERY_ALLOW_PRIVATE_NETWORKS=true", "DEMOSVC_DELIVERY_BACKOFF=1s", "DEMOSVC_DELIVERY_BACKOFF_FACTOR=1",
		"DEMOSVC_DELIVERY_MAX_RETRIES=10", "DEMOSVC_LOG_LEVEL=warn",
		// The same on every node: one node seals a webhook's secret, another may deliver.
		"DEMOSVC_SECRETS_MASTER_KEY=" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32)),
	}, extraEnv...)
	for i := range c.nodes {
		c.start(i)
	}
	t.Cleanup(func() {
		for i, n := range c.nodes {
			if n.cmd != nil {
				_ = n.cmd.Process.Signal(syscall.SIGCONT)
				_ = n.cmd.Process.Kill()
				<-n.exited
				if t.Failed() {
					b, _ := os.ReadFile(filepath.Join(base, fmt.Sprintf("n%d.log", i+1)))
					var keep []string
					for _, l := range strings.Split(string(b), "\n") {
						if !strings.Contains(l, "msg=request") {
							keep = append(keep, l)
						}
					}
					t.Logf("--- %s stderr, without request lines (last 6000 bytes):\n%s", n.name, tail([]byte(strings.Join(keep, "\n")), 6000))
				}
			}
		}
	})
	for i := range c.nodes {
		c.waitReady(i)
	}
	keyRE := regexp.MustCompile(`\bsk_[A-Za-z0-9_-]+`)
	c.poll("the bootstrap key printed by the first writer", 60*time.Second, func() bool {
		for i := range c.nodes {
			b, _ := os.ReadFile(filepath.Join(base, fmt.Sprintf("n%d.out", i+1)))
			if k := keyRE.Find(b); k != nil {
				c.key = string(k)
				return true
			}
		}
		return false
	})
	// Every node knows the key before a test uses it: a node may answer
	// /readyz before the first writer bootstraps, and a request is
	// authenticated before any X-Min-Seq it carries is waited on.
	for i := range c.nodes {
		c.poll(c.nodes[i].name+" knowing the bootstrap key", 60*time.Second, func() bool {
			status, _, _, err := c.do(i, http.MethodGet, "/v1/account", "")
			return err == nil && status == http.StatusOK
		})
	}
	return c
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// start starts node i on its data dir (made if missing).
func (c *procCluster) start(i int) {
	n := c.nodes[i]
	base := filepath.Dir(n.dir)
	out, err := os.OpenFile(filepath.Join(base, n.name+".out"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		c.t.Fatal(err)
	}
	errf, err := os.OpenFile(filepath.Join(base, n.name+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		c.t.Fatal(err)
	}
	cmd := exec.Command(c.bin, "serve", "--data", n.dir, "--listen", n.api)
	cmd.Env = append(append(withoutBenchEnv(os.Environ()), c.env...), "DEMOSVC_CLUSTER_NODE_NAME="+n.name,
		"DEMOSVC_CLUSTER_LISTEN="+n.route)
	cmd.Stdout, cmd.Stderr = out, errf
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	n.cmd, n.exited = cmd, make(chan struct{})
	go func() { _ = cmd.Wait(); out.Close(); errf.Close(); close(n.exited) }()
}

// kill sends SIGKILL to node i and waits for it to be gone.
func (c *procCluster) kill(i int) {
	n := c.nodes[i]
	_ = n.cmd.Process.Kill()
	<-n.exited
	n.cmd = nil
}

func (c *procCluster) url(i int) string { return "http://" + c.nodes[i].api }

// readyz returns node i's /readyz cluster view, ok false when it does not
// answer 200.
func (c *procCluster) readyz(i int) (roles []string, seq uint64, ok bool) {
	if c.nodes[i].cmd == nil {
		return nil, 0, false
	}
	cl := &http.Client{Timeout: 2 * time.Second}
	resp, err := cl.Get(c.url(i) + "/readyz")
	if err != nil {
		return nil, 0, false
	}
	defer resp.Body.Close()
	var body struct {
		Cluster struct {
			Roles []string `json:"roles"`
			Seq   uint64   `json:"applied_seq"`
		} `json:"cluster"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&body) != nil {
		return nil, 0, false
	}
	return body.Cluster.Roles, body.Cluster.Seq, true
}

// waitReady waits for node i's /readyz to answer 200. On a cluster node
// that means its NATS server also holds a current copy of the log
// (natslog.Node.Joined): killing another node while a restarted one still
// catches up from an empty data dir leaves the stream without a quorum
// NATS will count, and no writer is elected.
func (c *procCluster) waitReady(i int) {
	c.poll(c.nodes[i].name+" ready", 90*time.Second, func() bool { _, _, ok := c.readyz(i); return ok })
}

// holder returns the live node that reports role, or -1.
func (c *procCluster) holder(role string) int {
	for i := range c.nodes {
		roles, _, _ := c.readyz(i)
		for _, r := range roles {
			if r == role {
				return i
			}
		}
	}
	return -1
}

func (c *procCluster) waitHolder(role string, not int) int {
	h := -1
	c.poll("a node holding the "+role+" lease", 60*time.Second, func() bool {
		h = c.holder(role)
		return h >= 0 && h != not
	})
	return h
}

// poll calls cond until it holds, failing the test after limit.
func (c *procCluster) poll(what string, limit time.Duration, cond func() bool) {
	c.t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			c.t.Fatalf("%s: not after %v", what, limit)
		}
		time.Sleep(200 * time.Millisecond) // polling interval
	}
}

// do sends one API request to node i.
func (c *procCluster) do(i int, method, path, body string, header ...string) (int, []byte, http.Header, error) {
	req, err := http.NewRequest(method, c.url(i)+path, strings.NewReader(body))
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for j := 0; j+1 < len(header); j += 2 {
		req.Header.Set(header[j], header[j+1])
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, resp.Header, err
}

// export returns node i's log as `demosvc log export` prints it.
func (c *procCluster) export(i int) []byte {
	c.t.Helper()
	cmd := exec.Command(c.bin, "log", "export", "--data", c.nodes[i].dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		c.t.Fatalf("log export on %s: %v\n%s", c.nodes[i].name, err, stderr.String())
	}
	return out
}

// verify runs `demosvc log verify` on node i and returns its output.
func (c *procCluster) verify(i int) string {
	c.t.Helper()
	out, err := exec.Command(c.bin, "log", "verify", "--data", c.nodes[i].dir).CombinedOutput()
	if err != nil {
		c.t.Fatalf("log verify on %s: %v\n%s", c.nodes[i].name, err, out)
	}
	return strings.TrimSpace(string(out))
}

// lastLine is the last JSON line of an export: the head record, with its hash.
func lastLine(b []byte) string {
	var last string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		last = sc.Text()
	}
	return last
}

// receiver is a webhook endpoint that records every body it is sent.
type receiver struct {
	mu     sync.Mutex
	bodies []string
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	b, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	r.bodies = append(r.bodies, string(b))
	r.mu.Unlock()
}

func (r *receiver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.bodies)
}

func (r *receiver) all() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.bodies, "\n")
}

// writers is 16 clients spread over the nodes, each creating sessions
// (each with a new contact) until stopped, moving on to the next node when
// theirs does not answer. It keeps what was acknowledged.
type writers struct {
	mu    sync.Mutex
	acked map[string]string // session id -> contact e-mail
	stop  chan struct{}
	wg    sync.WaitGroup
	// sent and acked are, for every acknowledged write, when it was sent
	// and when its answer came (for failover times).
	sent, ackedAt []time.Time
}

func (c *procCluster) startWriters(agent string) *writers {
	w := &writers{acked: map[string]string{}, stop: make(chan struct{})}
	for cl := range 16 {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			node := cl % len(c.nodes)
			for n := 0; ; n++ {
				select {
				case <-w.stop:
					return
				default:
				}
				email := fmt.Sprintf("c%d-%d@example.com", cl, n)
				sent := time.Now()
				status, body, _, err := c.do(node, http.MethodPost, "/v1/sessions",
					`{"agent_id":"`+agent+`","contact":{"name":"P","email":"`+email+`"}}`)
				if status == http.StatusCreated {
					var s struct {
						ID string `json:"id"`
					}
					if json.Unmarshal(body, &s) == nil && s.ID != "" {
						w.mu.Lock()
						w.acked[s.ID] = email
						w.sent, w.ackedAt = append(w.sent, sent), append(w.ackedAt, time.Now())
						w.mu.Unlock()
					}
				} else if err != nil {
					node = (node + 1) % len(c.nodes) // that node is down: ask another
				}
				time.Sleep(150 * time.Millisecond) // pacing: a small volume for a 2-core CI machine
			}
		}()
	}
	return w
}

func (w *writers) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acked)
}

// firstSentAfter returns when the first write sent after t was
// acknowledged, ok false while none is: a write answered just after a kill
// but sent before it says nothing of the failover.
func (w *writers) firstSentAfter(t time.Time) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var first time.Time
	for i, s := range w.sent {
		if s.After(t) && (first.IsZero() || w.ackedAt[i].Before(first)) {
			first = w.ackedAt[i]
		}
	}
	return first, !first.IsZero()
}

// The writer is killed twice while 16 clients write through all nodes;
// the second killed node comes back with an empty data dir, and the
// dispatcher is killed too. Every acknowledged write is then readable on
// every node, the three logs are the same byte for byte (so `log verify`
// gives the same head and hash), and every contact created reached the
// webhook receiver at least once.
func TestClusterFailover(t *testing.T) {
	c := newProcCluster(t)
	hook := &receiver{}
	hookSrv := httptest.NewServer(hook)
	defer hookSrv.Close()
	w0 := c.waitHolder("writer", -1)
	// A follower may not have seen the new lease yet: it answers 503 with
	// Retry-After without forwarding, which a client retries.
	var status int
	var body []byte
	var err error
	c.poll("a follower forwarding a write", 60*time.Second, func() bool {
		status, body, _, err = c.do((w0+1)%3, http.MethodPost, "/v1/webhooks", `{"url":"`+hookSrv.URL+`/hook","events":["contact.created"]}`)
		return err != nil || status != http.StatusServiceUnavailable
	})
	if err != nil || status != http.StatusCreated {
		t.Fatalf("webhook through a follower: %d %s %v", status, body, err)
	}
	var webhook struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(body, &webhook)
	defer func() {
		if !t.Failed() {
			return
		}
		for i := range c.nodes {
			st, _ := exec.Command(c.bin, "cluster", "status", "--data", c.nodes[i].dir).CombinedOutput()
			_, wh, _, _ := c.do(i, http.MethodGet, "/v1/webhooks/"+webhook.ID, "")
			_, ds, _, _ := c.do(i, http.MethodGet, "/v1/webhooks/"+webhook.ID+"/deliveries?limit=3", "")
			t.Logf("%s: status %s\nwebhook %s\ndeliveries %s", c.nodes[i].name, st, wh, tail(ds, 1500))
		}
	}()
	// The other follower too may not have seen the lease yet (CI saw it).
	var hdr http.Header
	c.poll("the other follower forwarding a write", 60*time.Second, func() bool {
		status, body, hdr, err = c.do((w0+2)%3, http.MethodPost, "/v1/agents", `{"name":"A","sandbox_url":"https://sandbox.example.com/a"}`)
		return err != nil || status != http.StatusServiceUnavailable
	})
	if err != nil || status != http.StatusCreated {
		t.Fatalf("agent through a follower: %d %s %v", status, body, err)
	}
	if hdr.Get("X-Seq") == "" {
		t.Error("a write's answer carries no X-Seq")
	}
	var agent struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(body, &agent)
	// Read-your-writes on the node that answered, and X-Min-Seq elsewhere.
	if status, _, _, _ := c.do((w0+2)%3, http.MethodGet, "/v1/agents/"+agent.ID, ""); status != http.StatusOK {
		t.Fatalf("the agent on the node that created it: %d", status)
	}
	if status, _, _, _ := c.do((w0+1)%3, http.MethodGet, "/v1/agents/"+agent.ID, "", "X-Min-Seq", hdr.Get("X-Seq")); status != http.StatusOK {
		t.Fatalf("the agent on another node with X-Min-Seq: %d", status)
	}

	w := c.startWriters(agent.ID)
	c.poll("writes before the first kill", 60*time.Second, func() bool { return w.count() >= 30 })
	var failovers []time.Duration
	failover := func(victim int, fresh bool) {
		killed := time.Now()
		c.kill(victim)
		var first time.Time
		c.poll("a write sent after the kill acknowledged", 90*time.Second, func() bool {
			var ok bool
			first, ok = w.firstSentAfter(killed)
			return ok
		})
		failovers = append(failovers, first.Sub(killed))
		if fresh {
			if err := os.RemoveAll(c.nodes[victim].dir); err != nil {
				t.Fatal(err)
			}
		}
		c.start(victim)
		c.waitReady(victim)
	}
	// Kill the writer twice: each time another node takes over. The
	// second comes back with an empty data dir and catches up.
	w1 := c.waitHolder("writer", -1)
	failover(w1, false)
	w2 := c.waitHolder("writer", w1)
	failover(w2, true)
	// And the webhook dispatcher, which is the writer again: a third
	// take-over, and the dispatching moves with it.
	d := c.waitHolder("dispatcher", -1)
	if wr := c.holder("writer"); wr != d {
		t.Errorf("the dispatcher is %d, the writer %d: only the writer dispatches", d, wr)
	}
	failover(d, false)
	n := w.count()
	c.poll("writes after the last restart", 60*time.Second, func() bool { return w.count() >= n+30 })
	close(w.stop)
	w.wg.Wait()
	t.Logf("acknowledged writes: %d; time from SIGKILL to the first acknowledged write sent after it: %v (writer, writer, dispatcher)", len(w.acked), failovers)

	// Every node applies everything, then serves every acknowledged write.
	var head uint64
	for i := range c.nodes {
		_, seq, _ := c.readyz(i)
		head = max(head, seq)
	}
	for i := range c.nodes {
		c.poll(fmt.Sprintf("%s at seq %d", c.nodes[i].name, head), 60*time.Second, func() bool {
			_, seq, ok := c.readyz(i)
			return ok && seq >= head
		})
		missing := 0
		for id := range w.acked {
			if status, _, _, _ := c.do(i, http.MethodGet, "/v1/sessions/"+id, ""); status != http.StatusOK {
				missing++
				if missing <= 5 {
					t.Errorf("%s: acknowledged session %s answers %d", c.nodes[i].name, id, status)
				}
			}
		}
		if missing > 0 {
			t.Errorf("%s: %d of %d acknowledged writes missing", c.nodes[i].name, missing, len(w.acked))
		}
	}
	// The same log everywhere: the same records, seqs and hashes.
	exports := make([][]byte, len(c.nodes))
	for i := range c.nodes {
		exports[i] = c.export(i)
	}
	for i := 1; i < len(c.nodes); i++ {
		if !bytes.Equal(exports[0], exports[i]) {
			t.Errorf("%s and %s hold different logs: heads\n%s\n%s", c.nodes[0].name, c.nodes[i].name, lastLine(exports[0]), lastLine(exports[i]))
		}
	}
	for i := range c.nodes {
		if v, v0 := c.verify(i), c.verify(0); v != v0 {
			t.Errorf("log verify on %s: %s; on %s: %s", c.nodes[i].name, v, c.nodes[0].name, v0)
		}
	}
	t.Logf("log verify on each node: %s; head %s", c.verify(0), lastLine(exports[0]))

	// At least once: every contact created reached the receiver.
	missing := 0
	defer func() { t.Logf("%d of %d contacts not delivered", missing, len(w.acked)) }()
	c.poll("every contact.created delivered", 120*time.Second, func() bool {
		all := hook.all()
		missing = 0
		for _, email := range w.acked {
			if !strings.Contains(all, email) {
				missing++
			}
		}
		return missing == 0
	})

	// The delivery state is written through the stream: once settled,
	// every node shows the same attempt log, byte for byte.
	pages := make([][]byte, len(c.nodes))
	c.poll("the same settled attempt log on every node", 60*time.Second, func() bool {
		for i := range c.nodes {
			status, body, _, err := c.do(i, http.MethodGet, "/v1/webhooks/"+webhook.ID+"/deliveries?limit=100", "")
			if err != nil || status != http.StatusOK || bytes.Contains(body, []byte(`"status":"pending"`)) {
				return false
			}
			pages[i] = body
		}
		return bytes.Equal(pages[0], pages[1]) && bytes.Equal(pages[0], pages[2])
	})
	if n := bytes.Count(pages[0], []byte(`"status":"succeeded"`)); n < 50 {
		t.Errorf("the attempt log's first page holds %d succeeded deliveries: %s", n, tail(pages[0], 500))
	}
	// Each new dispatcher resumed from the cursors and outcomes its
	// predecessor stored: a contact is sent again only if it was in
	// flight at a kill (at most delivery.concurrency, 16, sent and not
	// yet stored, plus the outcomes of one write), never the history.
	dups := hook.duplicates(w.acked)
	t.Logf("contacts delivered more than once: %d of %d", dups, len(w.acked))
	if limit := 3 * 2 * 16; dups > limit {
		t.Errorf("%d contacts delivered more than once over 3 failovers; at most %d were in flight", dups, limit)
	}
}

// duplicates counts the contacts of acked that arrived more than once.
func (r *receiver) duplicates(acked map[string]string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := map[string]int{}
	for _, b := range r.bodies {
		var d struct {
			Data struct {
				Contact struct {
					Email string `json:"email"`
				} `json:"contact"`
			} `json:"data"`
		}
		if json.Unmarshal([]byte(b), &d) == nil {
			seen[d.Data.Contact.Email]++
		}
	}
	n := 0
	for _, email := range acked {
		if seen[email] > 1 {
			n++
		}
	}
	return n
}

// A writer paused past its lease (SIGSTOP) loses it to another node; once
// resumed it takes no write: writes sent to it are forwarded to the new
// writer or refused, and the logs stay one.
func TestClusterStaleWriter(t *testing.T) {
	c := newProcCluster(t, "DEMOSVC_CLUSTER_READ_WAIT=1s")
	old := c.waitHolder("writer", -1)
	// X-Min-Seq: a bad one is a 400; one no node has reached waits
	// cluster.read_wait, then 503.
	if status, body, _, _ := c.do(old, http.MethodGet, "/v1/agents", "", "X-Min-Seq", "soon"); status != http.StatusBadRequest {
		t.Errorf("X-Min-Seq: soon: %d %s", status, body)
	}
	if status, body, _, _ := c.do((old+1)%3, http.MethodGet, "/v1/agents", "", "X-Min-Seq", "1000000"); status != http.StatusServiceUnavailable {
		t.Errorf("X-Min-Seq past the head: %d %s", status, body)
	}
	status, body, _, err := c.do(old, http.MethodPost, "/v1/agents", `{"name":"before","sandbox_url":"https://sandbox.example.com/a"}`)
	if err != nil || status != http.StatusCreated {
		t.Fatalf("a write on the writer: %d %s %v", status, body, err)
	}
	if err := c.nodes[old].cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	nw := c.waitHolder("writer", old)
	t.Logf("%s took over from the paused %s after %v", c.nodes[nw].name, c.nodes[old].name, time.Since(paused))
	status, body, _, err = c.do(nw, http.MethodPost, "/v1/agents", `{"name":"during","sandbox_url":"https://sandbox.example.com/a"}`)
	if err != nil || status != http.StatusCreated {
		t.Fatalf("a write on the new writer: %d %s %v", status, body, err)
	}
	if err := c.nodes[old].cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	// Right away, writes to the resumed node: none may be appended by it
	// as a writer. Each is either forwarded (and lands in the one log) or
	// refused with 503.
	var ok []string
	for n := range 20 {
		status, body, hdr, err := c.do(old, http.MethodPost, "/v1/agents", fmt.Sprintf(`{"name":"after%d","sandbox_url":"https://sandbox.example.com/a"}`, n))
		switch {
		case err != nil:
			t.Fatalf("write %d to the resumed node: %v", n, err)
		case status == http.StatusCreated:
			ok = append(ok, string(body))
			if hdr.Get("X-Seq") == "" {
				t.Errorf("write %d: no X-Seq", n)
			}
		case status != http.StatusServiceUnavailable:
			t.Fatalf("write %d to the resumed node: %d %s", n, status, body)
		}
	}
	c.poll("the resumed node a follower", 30*time.Second, func() bool {
		roles, _, ok := c.readyz(old)
		return ok && len(roles) > 0 && roles[0] == "follower"
	})
	// Its refused appends, if it tried any before its own clock told it
	// the lease was gone, are counted in cluster status.
	st, err := exec.Command(c.bin, "cluster", "status", "--data", c.nodes[old].dir).Output()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d writes through the resumed node acknowledged; its status: %s", len(ok), st)
	var head uint64
	for i := range c.nodes {
		_, seq, _ := c.readyz(i)
		head = max(head, seq)
	}
	for i := range c.nodes {
		c.poll(fmt.Sprintf("%s at seq %d", c.nodes[i].name, head), 60*time.Second, func() bool {
			_, seq, ok := c.readyz(i)
			return ok && seq >= head
		})
	}
	e0 := c.export(0)
	for i := 1; i < 3; i++ {
		if !bytes.Equal(e0, c.export(i)) {
			t.Fatalf("%s and %s hold different logs after the stale writer resumed", c.nodes[0].name, c.nodes[i].name)
		}
	}
	for _, b := range ok {
		var a struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal([]byte(b), &a)
		for i := range c.nodes {
			if status, _, _, _ := c.do(i, http.MethodGet, "/v1/agents/"+a.ID, ""); status != http.StatusOK {
				t.Errorf("acknowledged agent %s: %d on %s", a.ID, status, c.nodes[i].name)
			}
		}
	}
}

// With cluster.tls_*, the nodes' routes are mutual TLS: the cluster forms,
// elects a writer and takes a write through a follower, and a node's route
// listener speaks TLS with the configured certificate.
func TestClusterOverTLS(t *testing.T) {
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "node.crt"), filepath.Join(dir, "node.key")
	writeCert(t, cert, key, 1)
	c := newProcCluster(t, "DEMOSVC_CLUSTER_TLS_CERT_FILE="+cert, "DEMOSVC_CLUSTER_TLS_KEY_FILE="+key,
		"DEMOSVC_CLUSTER_TLS_CA_FILE="+cert)
	w := c.waitHolder("writer", -1)
	var status int
	var body []byte
	var hdr http.Header
	var err error
	c.poll("a write through a follower", 60*time.Second, func() bool {
		status, body, hdr, err = c.do((w+1)%3, http.MethodPost, "/v1/agents", `{"name":"A","sandbox_url":"https://sandbox.example.com/a"}`)
		return err != nil || status != http.StatusServiceUnavailable
	})
	if err != nil || status != http.StatusCreated {
		t.Fatalf("a write through a follower: %d %s %v", status, body, err)
	}
	if status, body, _, _ := c.do((w+2)%3, http.MethodGet, "/v1/agents", "", "X-Min-Seq", hdr.Get("X-Seq")); status != http.StatusOK {
		t.Fatalf("the agent on the third node: %d %s", status, body)
	}
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(pair.Leaf)
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", c.nodes[w].route,
		&tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: roots, ServerName: "127.0.0.1"})
	if err != nil {
		t.Fatalf("a TLS handshake with the writer's route listener: %v", err)
	}
	conn.Close()
}

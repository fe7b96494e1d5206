package natslog

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"demosvc/config"
	"demosvc/eventlog"
	demohttp "demosvc/http"
	"demosvc/projections"
)

// replica is one node of a test cluster: its connection to JetStream, its
// own store and log, and its state following the stream.
type replica struct {
	node  *Node
	log   *eventlog.Log
	state *projections.Projections
	roles Roles
	// pause stops following the stream, as a paused process does;
	// follow starts following it again, until the test ends or pause.
	pause  func()
	follow func()
	// followed receives what Follow returned.
	followed chan error
}

// newReplica opens a node (on the embedded server when cfg.Server is
// set), a log in a fresh store, and follows the stream into the state.
func newReplica(t *testing.T, ctx context.Context, name string, cfg Config, register ...func(*eventlog.Registry)) *replica {
	t.Helper()
	reg := projections.NewRegistry()
	for _, r := range register {
		r(reg)
	}
	node, err := Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(node.Close)
	store, err := eventlog.OpenStore(t.TempDir(), eventlog.StoreOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	log, err := eventlog.OpenLog(store, eventlog.Options{Registry: reg,
		IDs: eventlog.NewIDs(time.Now), Replicator: node})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close() })
	state, err := projections.Open(log, projections.DefaultOptions)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(state.Close)
	r := &replica{node: node, log: log, state: state, followed: make(chan error, 1),
		roles: Roles{Node: name, Addr: name + ":1", Log: log, Prepare: state.ReloadIdempotency}}
	r.follow = func() {
		fctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			err := node.Follow(fctx, log, state.ApplyEntry)
			select {
			case r.followed <- err: // the first Follow's, which tests read
			default:
			}
		}()
		r.pause = func() { stop(); <-done }
	}
	r.follow()
	t.Cleanup(func() { r.pause() })
	return r
}

// testCluster starts two nodes, a on the embedded server; register, if
// given, adds to a's registry only.
func testCluster(t *testing.T, register ...func(*eventlog.Registry)) (context.Context, *replica, *replica) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	srvCfg := &ServerConfig{Cluster: "t", Node: "a", Listen: "127.0.0.1:-1", ClientListen: "127.0.0.1:-1",
		ClientToken: testToken, DataDir: t.TempDir()}
	a := newReplica(t, ctx, "a", Config{Server: srvCfg, Replicas: 1, LeaseTTL: time.Second}, register...)
	b := newReplica(t, ctx, "b", Config{NATSURL: withToken(a.node.srv.ClientURL()), Replicas: 1, LeaseTTL: time.Second})
	return ctx, a, b
}

// testToken is the client token of the tests' embedded servers.
const testToken = "test-token-of-at-least-32-characters"

// withToken is a server's client URL with testToken in it.
func withToken(clientURL string) string {
	return strings.Replace(clientURL, "nats://", "nats://"+testToken+"@", 1)
}

func export(t *testing.T, l *eventlog.Log) []byte {
	t.Helper()
	var buf bytes.Buffer
	if _, err := l.Export(&buf, 1); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// One writer at a time; its writes reach the other node's store record for
// record; once its lease lapses the other takes over behind a fence, and
// the old writer's appends are refused: on the stream, and through its
// log, whose state goes back to what the stream holds.
func TestWriterLeaseAndFence(t *testing.T) {
	ctx, a, b := testCluster(t)
	a.node.keepWriter(ctx, a.roles)
	if !a.node.IsWriter() {
		t.Fatal("a did not take the free writer lease")
	}
	if _, _, created, err := a.state.Bootstrap(ctx, "pro"); err != nil || !created {
		t.Fatalf("bootstrap on the writer: created %v, err %v", created, err)
	}
	if _, _, _, err := b.state.Bootstrap(ctx, "pro"); !errors.Is(err, eventlog.ErrNotWriter) {
		t.Fatalf("a write on the follower: err %v, want ErrNotWriter", err)
	}
	// An admin command on the follower (`accounts create` through its
	// socket) names the writer to run it on.
	b.node.keepWriter(ctx, b.roles) // b finds a holding the lease
	admin := &demohttp.Admin{Log: b.log, State: b.state, Config: config.Default(), WriterAddr: b.node.WriterAddr}
	rw := httptest.NewRecorder()
	admin.Handler().ServeHTTP(rw, httptest.NewRequest("POST", "/admin/accounts", strings.NewReader(`{"name":"Acme","plan":"pro"}`)))
	if rw.Code != http.StatusServiceUnavailable || !strings.Contains(rw.Body.String(), "not the cluster's writer") ||
		!strings.Contains(rw.Body.String(), "answers at a:1") {
		t.Errorf("accounts create on the follower: %d %s; want 503 naming the writer's address", rw.Code, rw.Body)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := b.log.WaitFor(wctx, a.log.DurableSeq()); err != nil {
		t.Fatalf("b applied up to %d of %d: %v", b.log.DurableSeq(), a.log.DurableSeq(), err)
	}
	if !bytes.Equal(export(t, a.log), export(t, b.log)) {
		t.Fatal("the two stores hold different logs")
	}
	if len(b.state.Accounts()) != 1 {
		t.Fatalf("b's state has %d accounts, want the writer's 1", len(b.state.Accounts()))
	}

	b.node.keepWriter(ctx, b.roles)
	if b.node.IsWriter() {
		t.Fatal("b took the writer lease while a held it")
	}
	// a stops renewing and following, as a paused process would; b takes
	// over once the lease has run out.
	a.pause()
	stalePos := a.log.ReplPos()
	deadline := time.Now().Add(15 * time.Second)
	for !b.node.IsWriter() {
		if time.Now().After(deadline) {
			t.Fatal("b never took over the lapsed lease")
		}
		time.Sleep(50 * time.Millisecond) // polling interval
		b.node.keepWriter(ctx, b.roles)
	}
	if err := a.node.Writable(); !errors.Is(err, eventlog.ErrNotWriter) {
		t.Fatalf("a after its lease ran out: Writable %v", err)
	}
	// The stale writer appends anyway, expecting the position it last saw.
	if _, err := a.node.Append(emptyEntry, stalePos); !errors.Is(err, eventlog.ErrStale) {
		t.Fatalf("stale append: err %v, want ErrStale", err)
	}
	// And through its log, with a clock that still believes the lease (a
	// process paused between its check and its append): refused, nothing
	// written, the state as the stream says.
	head := a.log.DurableSeq()
	a.node.writable.Store(true)
	a.node.writer.mu.Lock()
	a.node.writer.validUntil = time.Now().Add(time.Hour)
	a.node.writer.mu.Unlock()
	_, err := a.state.CreateAccount(ctx, "cli", "stale", "pro", 0)
	if !errors.Is(err, eventlog.ErrStale) {
		t.Fatalf("a write through the stale writer's log: err %v, want ErrStale", err)
	}
	if a.node.writable.Load() {
		t.Error("the stale writer did not step down after a refused append")
	}
	if a.log.DurableSeq() != head {
		t.Errorf("the refused write reached a's store: head %d, was %d", a.log.DurableSeq(), head)
	}
	for _, acc := range a.state.Accounts() {
		if acc.Name == "stale" {
			t.Error("the refused write is in a's state")
		}
	}
	// The new writer writes; a, resumed, follows it.
	acc, err := b.state.CreateAccount(ctx, "cli", "fresh", "pro", 0)
	if err != nil {
		t.Fatal(err)
	}
	resumed := make(chan struct{})
	defer func() { cancel(); <-resumed }()
	go func() { defer close(resumed); _ = a.node.Follow(wctx, a.log, a.state.ApplyEntry) }()
	if err := a.log.WaitFor(wctx, b.log.DurableSeq()); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(export(t, a.log), export(t, b.log)) {
		t.Fatal("after the failover the two stores hold different logs")
	}
	found := false
	for _, x := range a.state.Accounts() {
		found = found || x.ID == acc.ID
	}
	if !found {
		t.Error("the new writer's account is not in the old writer's state")
	}
}

// An entry that does not continue a node's chain is refused whole.
func TestApplyEntryRefusesABrokenChain(t *testing.T) {
	ctx, a, b := testCluster(t)
	a.node.keepWriter(ctx, a.roles)
	if _, _, _, err := a.state.Bootstrap(ctx, "pro"); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := b.log.WaitFor(wctx, a.log.DurableSeq()); err != nil {
		t.Fatal(err)
	}
	// Replaying the stream's first entry at a later position: its seqs
	// are taken.
	msg, err := a.node.stream.GetMsg(ctx, a.log.ReplPos())
	if err != nil {
		t.Fatal(err)
	}
	head := b.log.DurableSeq()
	if err := b.log.ApplyEntry(b.log.ReplPos()+1, msg.Data, nil); !errors.Is(err, eventlog.ErrCorrupt) {
		t.Fatalf("a replayed entry: err %v, want ErrCorrupt", err)
	}
	if b.log.DurableSeq() != head {
		t.Fatal("the refused entry moved the head")
	}
}

// newerEvent is a type only the writer's registry knows, as a node of a
// newer version writes during a rolling upgrade.
type newerEvent struct {
	Note string `json:"note"`
}

func (newerEvent) Validate() error { return nil }

// During a rolling upgrade a newer writer may append a record of a type
// this node's build does not know.
func TestAFollowerStopsAtARecordItCannotRead(t *testing.T) {
	followerStopsAt(t, "test.newer", func(string) []eventlog.Event {
		return []eventlog.Event{{Account: "acc_1", Actor: "cli", Payload: newerEvent{Note: "from a newer writer"}}}
	}, func(r *eventlog.Registry) { eventlog.Register[newerEvent](r, "test.newer", 1) })
}

// Or a record this node's state refuses (a newer release may allow what
// an older one's rules do not): here the second of an entry's two
// records, so the state must also drop the first, which it took.
func TestAFollowerStopsAtARecordItsStateRefuses(t *testing.T) {
	followerStopsAt(t, "exists", func(acc string) []eventlog.Event {
		return []eventlog.Event{
			{Account: "acc_new", Actor: "cli", Payload: projections.AccountCreated{AccountID: "acc_new", Name: "New", Plan: "pro"}},
			{Account: acc, Actor: "cli", Payload: projections.AccountCreated{AccountID: acc, Name: "Again", Plan: "pro"}},
		}
	})
}

// followerStopsAt has a, the writer, append one entry of events after its
// bootstrap; b must refuse it with an error naming want, and stop
// following. It stores none of the entry (a record it stored but could not
// replay would leave it, at its next rebuild, with an empty state), goes
// on serving what it held, says why, refuses writes, and gives up the
// writer lease, since it could never catch up to a fence.
func followerStopsAt(t *testing.T, want string, events func(account string) []eventlog.Event, register ...func(*eventlog.Registry)) {
	ctx, a, b := testCluster(t, register...)
	a.node.keepWriter(ctx, a.roles)
	acc, key, _, err := a.state.Bootstrap(ctx, "pro")
	if err != nil {
		t.Fatal(err)
	}
	head, pos := a.log.DurableSeq(), a.log.ReplPos()
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := b.log.WaitFor(wctx, head); err != nil {
		t.Fatal(err)
	}
	a.node.keepWriter(ctx, a.roles) // renewed: a slow machine may have taken most of its TTL
	tx, err := a.log.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Add(events(acc.ID)); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-b.followed:
		if !errors.Is(err, ErrNotApplied) || !strings.Contains(err.Error(), want) {
			t.Fatalf("b's Follow = %v; want ErrNotApplied naming %q", err, want)
		}
	case <-wctx.Done():
		t.Fatal("b went on following past an entry it cannot apply")
	}
	if got := b.log.DurableSeq(); got != head {
		t.Errorf("b's store holds seq %d; want %d, nothing of the refused entry", got, head)
	}
	if got := b.log.ReplPos(); got != pos {
		t.Errorf("b's applied position is %d; want %d", got, pos)
	}
	if _, ok := b.state.Authenticate(key.Key); !ok || len(b.state.Accounts()) != 1 || b.state.Accounts()[0].ID != acc.ID {
		t.Errorf("b no longer serves the state it held: %d accounts", len(b.state.Accounts()))
	}
	if _, err := b.log.Verify(); err != nil {
		t.Errorf("b's log after the refusal: %v", err)
	}
	if err := b.node.Following(); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("b.Following() = %v; want why it stopped", err)
	}
	if st := b.node.Status(ctx, "b", b.log); !strings.Contains(st.NotFollowing, want) {
		t.Errorf("b's status says not_following %q", st.NotFollowing)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(demohttp.ClusterCollectors(b.node, b.log)...)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	following := -1.0
	for _, f := range families {
		if f.GetName() == "demosvc_cluster_following" {
			following = f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	if following != 0 {
		t.Errorf("demosvc_cluster_following = %v; want 0", following)
	}
	// A node starting up does not wait to catch up with entries it will
	// never apply: it starts, and says why.
	if err := b.node.CatchUp(wctx, b.log); err != nil {
		t.Errorf("CatchUp after following stopped: %v", err)
	}
	// /readyz says so, so that a rolling upgrade waiting for readiness
	// does not go on while this node serves an old copy; writes sent to
	// it are refused, since it would never show them.
	health := demohttp.NewHealth(b.log, nil)
	health.ClusterStatus(b.node)
	api := demohttp.NewServer(demohttp.Deps{Log: b.log, State: b.state, Config: config.Default(),
		Logger: slog.New(slog.DiscardHandler), Health: health})
	w := httptest.NewRecorder()
	api.ServeHTTP(w, httptest.NewRequest("GET", "/readyz", nil))
	var ready struct {
		Status string `json:"status"`
		Reason string `json:"reason"`
		Seq    uint64 `json:"applied_seq"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &ready); err != nil || w.Code != http.StatusServiceUnavailable ||
		ready.Status != "not_following" || !strings.Contains(ready.Reason, want) || ready.Seq != head {
		t.Errorf("b's /readyz = %d %s; want 503 not_following naming %q, applied_seq %d", w.Code, w.Body, want, head)
	}
	routed := demohttp.NewServer(demohttp.Deps{Log: b.log, State: b.state, Config: config.Default(),
		Logger: slog.New(slog.DiscardHandler), Health: health, Cluster: &demohttp.ClusterOptions{Node: b.node, Log: b.log,
			NodeName: "b", Scheme: "http", ReadWait: time.Second, Logger: slog.New(slog.DiscardHandler)}})
	w = httptest.NewRecorder()
	req := httptest.NewRequest("POST", "/v1/agents", strings.NewReader(`{"name":"Ada","sandbox_url":"https://sandbox.example.com/"}`))
	req.Header.Set("Authorization", "Bearer "+key.Key)
	routed.ServeHTTP(w, req)
	if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), "stopped following") {
		t.Errorf("a write sent to b = %d %s; want 503 saying b stopped following", w.Code, w.Body)
	}
	// Reads are refused too: b's state misses every change since it
	// stopped, a key revoked elsewhere among them. The open routes answer.
	for _, path := range []string{"/v1/agents", "/v1/account"} {
		w = httptest.NewRecorder()
		req = httptest.NewRequest("GET", path, nil)
		req.Header.Set("Authorization", "Bearer "+key.Key)
		routed.ServeHTTP(w, req)
		if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), "stopped following") {
			t.Errorf("GET %s sent to b = %d %s; want 503 saying b stopped following", path, w.Code, w.Body)
		}
	}
	for path, code := range map[string]int{"/healthz": http.StatusOK, "/metrics": http.StatusOK, "/readyz": http.StatusServiceUnavailable} {
		w = httptest.NewRecorder()
		routed.ServeHTTP(w, httptest.NewRequest("GET", path, nil))
		if w.Code != code || strings.Contains(w.Body.String(), "serves no requests") {
			t.Errorf("GET %s on b = %d %.200s; want %d, its own answer", path, w.Code, w.Body, code)
		}
	}
	// b holding the writer lease (taken before it stopped) gives it up at
	// its next renewal, and does not take it again.
	a.pause()
	rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
	defer rcancel()
	a.node.writer.release(rctx)
	if held, err := b.node.writer.try(rctx, "b", "b:1"); err != nil || !held {
		t.Fatalf("b taking the released lease: %v, %v", held, err)
	}
	b.node.writable.Store(true)
	b.node.keepWriter(ctx, b.roles)
	if b.node.writable.Load() || b.node.writer.valid() {
		t.Error("b kept the writer role though it stopped following")
	}
	if _, err := b.node.writer.kv.Get(rctx, b.node.writer.key); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("the writer lease after b gave it up: %v; want it free", err)
	}
	b.node.keepWriter(ctx, b.roles)
	if _, err := b.node.writer.kv.Get(rctx, b.node.writer.key); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("b took the free writer lease again: %v", err)
	}
}

// An append that fails for another reason than a stale position (a
// timeout, a lost connection) may still have reached the stream: the
// writer steps down, to fence and catch up before it writes again.
func TestAWriterStepsDownAfterAnAppendOfUnknownOutcome(t *testing.T) {
	b := bWriting(t)
	b.node.nc.Close() // the connection is lost mid-append, as far as b can tell
	_, err := b.node.Append(emptyEntry, b.log.ReplPos())
	if err == nil || errors.Is(err, eventlog.ErrStale) {
		t.Fatalf("append over a closed connection: err %v, want a failure other than ErrStale", err)
	}
	if err := b.node.Writable(); !errors.Is(err, eventlog.ErrNotWriter) {
		t.Errorf("after an append of unknown outcome b is still writable (%v): a retry under the same Idempotency-Key would not find the answer of an entry that landed", err)
	}
}

// An append refused before it was stored (too large a message) fails its
// own group only: the writer stays.
func TestAWriterStaysAfterAnAppendRefusedAsTooLarge(t *testing.T) {
	b := bWriting(t)
	if _, err := b.node.Append(make([]byte, maxPayload+1), b.log.ReplPos()); err == nil {
		t.Fatal("an entry over the largest message was taken")
	}
	if err := b.node.Writable(); err != nil {
		t.Errorf("b stepped down after an append that could not have landed: %v", err)
	}
}

// bWriting is node b of a test cluster, the writer.
func bWriting(t *testing.T) *replica {
	t.Helper()
	ctx, _, b := testCluster(t)
	b.node.keepWriter(ctx, b.roles)
	if err := b.node.Writable(); err != nil {
		t.Fatalf("b did not take the free writer lease: %v", err)
	}
	return b
}

// A node far behind the stream (back from a long stop) that takes the
// free writer lease gives it up once it has held it a TTL without
// reaching its fence, and stays out a while: a node that is caught up
// becomes the writer, rather than the cluster having none for the whole
// catch-up.
func TestALaggingNodeLeavesTheWriterLeaseToOneCaughtUp(t *testing.T) {
	ctx, a, b := testCluster(t)
	a.node.keepWriter(ctx, a.roles)
	if !a.node.IsWriter() {
		t.Fatal("a did not take the free writer lease")
	}
	b.pause() // b is down, and applies nothing from here on
	if _, err := a.state.CreateAccount(ctx, "cli", "acme", "pro", 0); err != nil {
		t.Fatal(err)
	}
	a.node.writable.Store(false) // a stops cleanly and gives its lease up
	a.node.writer.release(ctx)
	// b takes the free lease first, and fences.
	b.node.keepWriter(ctx, b.roles)
	if !b.node.writer.valid() {
		t.Fatal("b did not take the free lease")
	}
	// Both role loops run (four ticks a TTL, as Run).
	deadline := time.Now().Add(15 * time.Second)
	for !a.node.IsWriter() {
		if time.Now().After(deadline) {
			t.Fatalf("a, caught up, is not the writer 15 lease TTLs on: b holds the lease (%+v) at position %d, its fence at %d",
				b.node.writer.holder(), b.log.ReplPos(), b.node.fence)
		}
		time.Sleep(250 * time.Millisecond) // a tick
		b.node.keepWriter(ctx, b.roles)
		a.node.keepWriter(ctx, a.roles)
	}
	if b.node.IsWriter() {
		t.Error("b, which never reached its fence, is a writer too")
	}
}

// Transactions of several records reach the other node byte for byte:
// the writer encodes each record into one reused buffer, and what it
// replicates must be each record's own copy.
func TestTransactionsOfSeveralRecordsReachEveryNode(t *testing.T) {
	ctx, a, b := testCluster(t)
	a.node.keepWriter(ctx, a.roles)
	_, key, _, err := a.state.Bootstrap(ctx, "pro") // an account and its key: one transaction
	if err != nil {
		t.Fatal(err)
	}
	pr, ok := a.state.Authenticate(key.Key)
	if !ok {
		t.Fatal("the bootstrap key does not authenticate")
	}
	agent, err := a.state.CreateAgent(ctx, pr, projections.AgentInput{Name: "Ada", SandboxURL: "https://sandbox.example.com/"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	agentID := agent.(projections.AgentView).ID
	for i := range 3 { // a new contact and its session: one transaction each
		in := projections.SessionInput{AgentID: agentID, Contact: &projections.Contact{Name: "Pat", Email: fmt.Sprintf("pat%d@example.com", i), Company: "Initech"}}
		if _, err := a.state.StartSession(ctx, pr, in, nil); err != nil {
			t.Fatal(err)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := b.log.WaitFor(wctx, a.log.DurableSeq()); err != nil {
		t.Fatalf("b waiting for seq %d: %v", a.log.DurableSeq(), err)
	}
	if got, want := export(t, b.log), export(t, a.log); !bytes.Equal(got, want) {
		t.Errorf("b's log differs from a's:\n%s\nwant\n%s", got, want)
	}
}

// The delivery state's writes go through the stream: the writer's reach
// every node's store, range deletions included; a follower's are refused,
// and so is a range deletion that reaches into the log.
func TestStateWritesReachEveryNode(t *testing.T) {
	ctx, a, b := testCluster(t)
	a.node.keepWriter(ctx, a.roles)
	if !a.node.IsWriter() {
		t.Fatal("a did not take the free writer lease")
	}
	key := func(s string) []byte { return append([]byte{eventlog.KeyspaceDelivery}, s...) }
	if err := a.log.WriteSync([]eventlog.Put{{Key: key("w1/a"), Value: []byte("1")}, {Key: key("w1/b"), Value: []byte("2")},
		{Key: key("w2/a"), Value: []byte("3")}}, nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := a.log.StartWriteSync([]eventlog.Put{{Key: key("w2/b"), Value: []byte("4")}}, key("w1/"), key("w10"))(); err != nil {
		t.Fatal(err)
	}
	if err := b.log.WriteSync([]eventlog.Put{{Key: key("w3/a"), Value: []byte("5")}}, nil, nil); !errors.Is(err, eventlog.ErrNotWriter) {
		t.Fatalf("a write on the follower: err %v, want ErrNotWriter", err)
	}
	pos := a.log.ReplPos()
	if err := a.log.WriteSync(nil, []byte{eventlog.KeyspaceLog - 1}, []byte{eventlog.KeyspaceLog + 1}); err == nil {
		t.Fatal("a range deletion over the log's keyspace was taken")
	}
	if a.log.ReplPos() != pos {
		t.Fatal("the refused range deletion was appended")
	}
	waitUntil(t, 10*time.Second, fmt.Sprintf("b applying up to position %d", pos), func() bool { return b.log.ReplPos() >= pos })
	for _, r := range []*replica{a, b} {
		for k, want := range map[string]string{"w1/a": "", "w1/b": "", "w2/a": "3", "w2/b": "4", "w3/a": ""} {
			v, ok, err := r.log.Store().Get(key(k))
			if err != nil || string(v) != want || ok != (want != "") {
				t.Errorf("%s: %s = %q (%v, %v), want %q", r.roles.Node, k, v, ok, err, want)
			}
		}
	}
}

// WaitForPos on a follower returns once it has applied an entry that
// holds no record (delivery state), which moves its position and not its
// seq: what a forwarded delivery retry's answer waits for (X-Position).
func TestAFollowerWaitsForAnEntryWithoutRecords(t *testing.T) {
	ctx, a, b := testCluster(t)
	a.node.keepWriter(ctx, a.roles)
	if !a.node.IsWriter() {
		t.Fatal("a did not take the free writer lease")
	}
	b.pause()
	seq, pos := b.log.DurableSeq(), b.log.ReplPos()
	waited := make(chan error, 1)
	go func() { waited <- b.log.WaitForPos(ctx, pos+1) }()
	key := []byte{eventlog.KeyspaceDelivery, 'w'}
	a.node.keepWriter(ctx, a.roles) // renewed: a slow machine may have taken most of its TTL
	if err := a.log.WriteSync([]eventlog.Put{{Key: key, Value: []byte("1")}}, nil, nil); err != nil {
		t.Fatal(err)
	}
	if a.log.ReplPos() != pos+1 || a.log.DurableSeq() != seq {
		t.Fatalf("a at seq %d, position %d after a write of state; want %d, %d", a.log.DurableSeq(), a.log.ReplPos(), seq, pos+1)
	}
	select {
	case err := <-waited:
		t.Fatalf("WaitForPos(%d) on b, which applies nothing, returned %v", pos+1, err)
	default:
	}
	b.follow()
	select {
	case err := <-waited:
		if err != nil || b.log.ReplPos() != pos+1 {
			t.Fatalf("WaitForPos(%d) on b: %v at position %d", pos+1, err, b.log.ReplPos())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("WaitForPos(%d) on b still waits at position %d", pos+1, b.log.ReplPos())
	}
}

// Only the writer dispatches: a node that is not the writer leaves the
// dispatcher lease alone, however free, and takes it once it writes.
func TestOnlyTheWriterDispatches(t *testing.T) {
	ctx, a, b := testCluster(t)
	// b is the writer, renewing its lease until told to stop.
	b.node.keepWriter(ctx, b.roles)
	if !b.node.IsWriter() {
		t.Fatal("b did not take the free writer lease")
	}
	bctx, stopB := context.WithCancel(ctx)
	bdone := make(chan struct{})
	go func() {
		defer close(bdone)
		for bctx.Err() == nil {
			b.node.keepWriter(bctx, b.roles)
			select {
			case <-bctx.Done():
			case <-time.After(100 * time.Millisecond): // renewal pace
			}
		}
	}()
	dispatching := make(chan string, 4)
	a.roles.Dispatch = func(dctx context.Context) {
		dispatching <- a.roles.Node
		<-dctx.Done()
	}
	actx, stopA := context.WithCancel(ctx)
	adone := make(chan struct{})
	go func() { defer close(adone); a.node.Run(actx, a.roles) }()
	defer func() { stopA(); <-adone }()
	// a has gone round its lease loop at least once when it has seen two
	// of b's renewals; the dispatcher lease is free all along.
	var seen []int64
	deadline := time.Now().Add(20 * time.Second)
	for len(seen) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("a saw b's writer lease as %v", seen)
		}
		if v := a.node.writer.holder(); v.Node == "b" && (len(seen) == 0 || seen[len(seen)-1] != v.Expires) {
			seen = append(seen, v.Expires)
		}
		time.Sleep(10 * time.Millisecond) // polling interval
	}
	if a.node.IsDispatcher() || len(dispatching) > 0 {
		t.Fatal("a follower took the dispatcher lease")
	}
	// b stops and gives its lease up: a writes, and dispatches.
	stopB()
	<-bdone
	b.node.writer.release(ctx)
	select {
	case <-dispatching:
		if !a.node.IsWriter() || !a.node.IsDispatcher() {
			t.Fatalf("a dispatches; writer %v, dispatcher %v", a.node.IsWriter(), a.node.IsDispatcher())
		}
	case <-ctx.Done():
		t.Fatal("a never dispatched after b stopped")
	}
	// b, a follower now, names a as the holder of both leases in its
	// status (`cluster status` on it), though it never takes the
	// dispatcher lease itself.
	if st := b.node.Status(ctx, "b", b.log); st.Writer.Node != "a" || st.Dispatcher.Node != "a" {
		t.Errorf("b's status names writer %+v and dispatcher %+v; want a for both", st.Writer, st.Dispatcher)
	}
}

// TestAWriterStoppingStoresWhatItsDeliveriesFinish: at a node's shutdown
// its deliveries stop first, while it still takes writes, so that the
// outcomes of the attempts in flight are stored, not sent again by the
// next writer.
func TestAWriterStoppingStoresWhatItsDeliveriesFinish(t *testing.T) {
	ctx, a, _ := testCluster(t)
	dispatching := make(chan struct{})
	stored := make(chan error, 1)
	a.roles.Dispatch = func(dctx context.Context) {
		close(dispatching)
		<-dctx.Done()
		// An attempt in flight finishes: its outcome is written.
		stored <- a.log.WriteSync([]eventlog.Put{{Key: append([]byte{eventlog.KeyspaceDelivery}, "w1/d1"...), Value: []byte("succeeded")}}, nil, nil)
	}
	actx, stopA := context.WithCancel(ctx)
	adone := make(chan struct{})
	go func() { defer close(adone); a.node.Run(actx, a.roles) }()
	select {
	case <-dispatching:
	case <-ctx.Done():
		t.Fatal("a never dispatched")
	}
	stopA()
	<-adone
	if err := <-stored; err != nil {
		t.Fatalf("an outcome written as the writer stops: %v; want it stored", err)
	}
}

// relay forwards TCP connections to a server; cut closes them and stops
// listening, as a network partition would, and restore listens again on
// the same address.
type relay struct {
	t     *testing.T
	to    string
	addr  string
	mu    sync.Mutex
	ln    net.Listener
	conns []net.Conn
}

// relayedCluster starts a node on an embedded server and a relay to that
// server's client port, for a second node to connect through.
func relayedCluster(t *testing.T, ctx context.Context) (*replica, *relay) {
	t.Helper()
	srvCfg := &ServerConfig{Cluster: "t", Node: "a", Listen: "127.0.0.1:-1", ClientListen: "127.0.0.1:-1",
		ClientToken: testToken, DataDir: t.TempDir()}
	a := newReplica(t, ctx, "a", Config{Server: srvCfg, Replicas: 1, LeaseTTL: time.Second})
	return a, newRelay(t, strings.TrimPrefix(a.node.srv.ClientURL(), "nats://"))
}

func newRelay(t *testing.T, to string) *relay {
	r := &relay{t: t, to: to, addr: "127.0.0.1:0"}
	r.restore()
	t.Cleanup(r.cut)
	return r
}

func (r *relay) restore() {
	ln, err := net.Listen("tcp", r.addr)
	if err != nil {
		r.t.Fatal(err)
	}
	r.mu.Lock()
	r.ln, r.addr = ln, ln.Addr().String()
	r.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", r.to)
			if err != nil {
				c.Close()
				continue
			}
			r.mu.Lock()
			r.conns = append(r.conns, c, s)
			r.mu.Unlock()
			go func() { io.Copy(s, c); s.Close() }()
			go func() { io.Copy(c, s); c.Close() }()
		}
	}()
}

func (r *relay) cut() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ln != nil {
		r.ln.Close()
		r.ln = nil
	}
	for _, c := range r.conns {
		c.Close()
	}
	r.conns = nil
}

// A node cut off from the cluster's NATS (a partition; the server it
// connects to paused) says so once it has heard nothing for two lease
// TTLs: /readyz answers 503 "disconnected", and it serves no request, so
// that a key revoked meanwhile on another node does not work here. Once it
// hears again it serves again.
func TestANodeCutOffFromTheClusterServesNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a, link := relayedCluster(t, ctx)
	b := newReplica(t, ctx, "b", Config{NATSURL: withToken("nats://" + link.addr), Replicas: 1, LeaseTTL: time.Second})
	// a takes the lease before b runs at all: started together, either
	// could, and the cut is b's.
	go a.node.Run(ctx, a.roles)
	waitUntil(t, 30*time.Second, "a to be the writer", func() bool { return a.node.IsWriter() })
	go b.node.Run(ctx, b.roles)
	_, key, _, err := a.state.Bootstrap(ctx, "pro")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.log.WaitFor(ctx, a.log.DurableSeq()); err != nil {
		t.Fatal(err)
	}
	health := demohttp.NewHealth(b.log, nil)
	health.ClusterStatus(b.node)
	routed := demohttp.NewServer(demohttp.Deps{Log: b.log, State: b.state, Config: config.Default(),
		Logger: slog.New(slog.DiscardHandler), Health: health, Cluster: &demohttp.ClusterOptions{Node: b.node, Log: b.log,
			NodeName: "b", Scheme: "http", ReadWait: time.Second, Logger: slog.New(slog.DiscardHandler)}})
	get := func(path string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		req := httptest.NewRequest("GET", path, nil)
		req.Header.Set("Authorization", "Bearer "+key.Key)
		routed.ServeHTTP(w, req)
		return w
	}
	if w := get("/v1/account"); w.Code != http.StatusOK || b.node.InTouch() != nil {
		t.Fatalf("b in touch: GET /v1/account = %d %s, InTouch %v", w.Code, w.Body, b.node.InTouch())
	}

	// b applies nothing while it is cut off, nor once back until it
	// follows again below: as a consumer slow to start over does.
	b.pause()
	link.cut()
	if _, err := a.state.RevokeKey(ctx, "cli", key.ID); err != nil {
		t.Fatal(err)
	}
	revokedAt := a.log.ReplPos()
	waitUntil(t, 30*time.Second, "b to say it is out of touch", func() bool { return b.node.InTouch() != nil })
	var ready struct{ Status, Reason string }
	w := get("/readyz")
	if err := json.Unmarshal(w.Body.Bytes(), &ready); err != nil || w.Code != http.StatusServiceUnavailable || ready.Status != "disconnected" {
		t.Errorf("b's /readyz when cut off = %d %s; want 503 disconnected", w.Code, w.Body)
	}
	for _, path := range []string{"/v1/account", "/v1/agents"} {
		if w := get(path); w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), "lost touch with the cluster") {
			t.Errorf("GET %s on b cut off, with a key revoked meanwhile = %d %s; want 503", path, w.Code, w.Body)
		}
	}
	if w := get("/healthz"); w.Code != http.StatusOK {
		t.Errorf("/healthz on b cut off = %d", w.Code)
	}

	link.restore()
	// b is in touch again only once it has applied what it missed.
	waitUntil(t, 30*time.Second, "b's heartbeat to go through again", func() bool { return b.node.silence() == nil })
	if err := b.node.InTouch(); err == nil {
		t.Errorf("b in touch again at position %d, short of the revocation it missed at %d", b.log.ReplPos(), revokedAt)
	}
	if w := get("/v1/account"); w.Code != http.StatusServiceUnavailable {
		t.Errorf("GET /v1/account on b back but behind = %d %s; want 503", w.Code, w.Body)
	}
	b.follow()
	waitUntil(t, 30*time.Second, "b to be in touch again", func() bool { return b.node.InTouch() == nil })
	if pos := b.log.ReplPos(); pos < revokedAt {
		t.Errorf("b in touch again at position %d, short of the revocation it missed at %d", pos, revokedAt)
	}
	if w := get("/v1/account"); w.Code != http.StatusUnauthorized {
		t.Errorf("GET /v1/account on b back in touch with the revoked key = %d %s; want 401", w.Code, w.Body)
	}
}

// A data dir that has applied the stream further than the stream goes (a
// node restored from a backup onto NATS storage that is not the one it was
// written with) is refused at start, naming both positions and what to do,
// where it came up and never took a write; once the head has been asked
// again for a while, since a server recovering the stream reads it short.
func TestADataDirAheadOfTheStreamIsRefused(t *testing.T) {
	// A head short of the data dir is asked again for headWait, as a
	// server recovering the stream after a restart reads one for a while.
	defer func(d time.Duration) { headWait = d }(headWait)
	headWait = 3 * time.Second
	ctx, a, b := testCluster(t)
	a.node.keepWriter(ctx, a.roles)
	if _, _, _, err := a.state.Bootstrap(ctx, "pro"); err != nil {
		t.Fatal(err)
	}
	if err := b.log.WaitFor(ctx, a.log.DurableSeq()); err != nil {
		t.Fatal(err)
	}
	b.pause()
	// Another cluster's NATS storage: a stream that is empty.
	srvCfg := &ServerConfig{Cluster: "t2", Node: "c", Listen: "127.0.0.1:-1", DataDir: t.TempDir()}
	other, err := Open(ctx, Config{Server: srvCfg, Replicas: 1, LeaseTTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	err = other.CatchUp(ctx, b.log)
	var ahead *AheadError
	if !errors.As(err, &ahead) || ahead.Applied != b.log.ReplPos() || ahead.Head != 0 || !strings.Contains(err.Error(), "Backup and restore") {
		t.Fatalf("CatchUp of a data dir ahead of the stream: %v; want an AheadError at %d of 0", err, b.log.ReplPos())
	}
	// The empty stream's leader finds no last entry: a head of 0 for a
	// node that has applied nothing, and an error for one that has (NATS
	// answers a leader's failed read alike), where a rejoining node took
	// it for 0 and served at once.
	if head, err := other.leaderHead(ctx); head != 0 || err != nil {
		t.Errorf("the empty stream's head: %d, %v; want 0", head, err)
	}
	other.follows.Store(b.log)
	if head, err := other.leaderHead(ctx); err == nil {
		t.Errorf("the empty stream's head for a node at position %d: %d, no error", b.log.ReplPos(), head)
	}
	if err := b.node.CatchUp(ctx, b.log); err != nil {
		t.Errorf("CatchUp on its own stream: %v", err)
	}
}

// lockedBuffer is a log destination the test reads while a node writes it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A start that cannot read the stream's head (its NATS out of reach, the
// stream between leaders) asks again rather than giving the start up at
// the first failure, and goes on once it can (the stream is empty here,
// so that only the head's read is waited for).
func TestCatchUpAsksForTheHeadAgain(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, link := relayedCluster(t, ctx)
	var logs lockedBuffer
	b := newReplica(t, ctx, "b", Config{NATSURL: withToken("nats://" + link.addr), Replicas: 1, LeaseTTL: time.Second,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	link.cut()
	caught := make(chan error, 1)
	go func() { caught <- b.node.CatchUp(ctx, b.log) }()
	waitUntil(t, 30*time.Second, "a failed read of the head", func() bool {
		return strings.Contains(logs.String(), "reading the stream's head; trying again")
	})
	link.restore()
	select {
	case err := <-caught:
		if err != nil {
			t.Fatalf("CatchUp once the head could be read: %v", err)
		}
	case <-ctx.Done():
		t.Fatalf("CatchUp did not end once the head could be read; b logged:\n%s", logs.String())
	}
}

// A follower whose connection is cut while it starts following (the
// request that makes its consumer lost on the way) follows again once the
// connection is back, where it waited for that answer for good.
func TestAFollowerCutWhileItStartsFollowsOnceBack(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	a, link := relayedCluster(t, ctx)
	a.node.keepWriter(ctx, a.roles)
	if _, _, _, err := a.state.Bootstrap(ctx, "pro"); err != nil {
		t.Fatal(err)
	}
	b := newReplica(t, ctx, "b", Config{NATSURL: withToken("nats://" + link.addr), Replicas: 1, LeaseTTL: time.Second})
	link.cut()
	waitUntil(t, 30*time.Second, "b's connection to notice the cut", func() bool { return !b.node.nc.IsConnected() })
	link.restore()
	waitUntil(t, 60*time.Second, "b to apply a's records", func() bool { return b.log.DurableSeq() == a.log.DurableSeq() })
}

// Back from a silence, a node takes the stream's head as what it must
// apply only from a second read of it, rejoinConfirm after the first, and
// staleLeaderGone and a lease TTL after its last word before the silence:
// a stream leader cut off with it, hearing from no peer, answers as the
// leader until then.
func TestARejoiningNodeConfirmsTheHead(t *testing.T) {
	ctx, a, _ := testCluster(t)
	a.node.keepWriter(ctx, a.roles)
	if err := a.log.WriteSync([]eventlog.Put{{Key: []byte{eventlog.KeyspaceDelivery, 'w'}, Value: []byte("1")}}, nil, nil); err != nil {
		t.Fatal(err)
	}
	n, head := a.node, a.log.ReplPos()
	at := func(ago time.Duration) time.Duration { return time.Since(n.born) - ago }
	for _, c := range []struct {
		name                 string
		silentFrom, rejoinAt time.Duration // ago
		first                headRead
		want                 uint64
	}{
		{"no read yet", 60 * time.Second, 10 * time.Second, headRead{}, unknownHead},
		{"a read from before this silence ended", 60 * time.Second, 10 * time.Second, headRead{head: 1, at: at(20 * time.Second)}, unknownHead},
		{"a read a second ago", 60 * time.Second, 10 * time.Second, headRead{head: 1, at: at(time.Second)}, unknownHead},
		{"a silence that began 16 s ago", 16 * time.Second, 10 * time.Second, headRead{head: 1, at: at(5 * time.Second)}, unknownHead},
		{"confirmed", 60 * time.Second, 10 * time.Second, headRead{head: 1, at: at(5 * time.Second)}, head},
		{"the higher of the two", 60 * time.Second, 10 * time.Second, headRead{head: head + 7, at: at(5 * time.Second)}, head + 7},
	} {
		n.silentFrom.Store(int64(at(c.silentFrom)))
		n.rejoinAt.Store(int64(at(c.rejoinAt)))
		n.rejoin.Store(unknownHead)
		first := c.first
		n.rejoinHead(ctx, &first)
		if got := n.rejoin.Load(); got != c.want {
			t.Errorf("%s: rejoin %d, want %d", c.name, got, c.want)
		}
	}
}

// A writer that loses the dispatcher lease goes on renewing its writer
// lease while its deliveries stop (attempts in flight finish, up to their
// timeout), where it waited for them first and let the writer lease run
// out: a failover for a hiccup of the lease bucket. It takes the
// dispatcher lease again only once they have stopped.
func TestAWriterKeepsItsLeaseWhileItsDeliveriesStop(t *testing.T) {
	ctx, a, _ := testCluster(t)
	started, stopping, release := make(chan struct{}, 4), make(chan struct{}), make(chan struct{})
	var once sync.Once
	a.roles.Dispatch = func(dctx context.Context) {
		started <- struct{}{}
		<-dctx.Done()
		once.Do(func() { close(stopping) })
		<-release // attempts in flight
	}
	actx, stopA := context.WithCancel(ctx)
	ran := make(chan struct{})
	go func() { defer close(ran); a.node.Run(actx, a.roles) }()
	defer func() { stopA(); <-ran }()
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("a never dispatched")
	}
	// Another holds the dispatcher lease, by the bucket: a stops.
	forged, _ := json.Marshal(LeaseValue{Node: "x", Addr: "x:1", Expires: time.Now().Add(time.Hour).UnixMilli()})
	if _, err := a.node.kv.Put(ctx, a.node.dispatcher.key, forged); err != nil {
		t.Fatal(err)
	}
	select {
	case <-stopping:
	case <-time.After(30 * time.Second):
		t.Fatal("a did not stop dispatching")
	}
	rev := func() uint64 {
		e, err := a.node.kv.Get(ctx, a.node.writer.key)
		if err != nil {
			return 0
		}
		return e.Revision()
	}
	from := rev()
	waitUntil(t, 20*time.Second, "a to renew its writer lease while its deliveries stop", func() bool { return rev() >= from+3 })
	if !a.node.IsWriter() {
		t.Error("a is not the writer while its deliveries stop")
	}
	// Free again: a dispatches once the last dispatch has stopped.
	if err := a.node.kv.Delete(ctx, a.node.dispatcher.key); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 20*time.Second, "a to take the dispatcher lease again", func() bool {
		e, err := a.node.kv.Get(ctx, a.node.dispatcher.key)
		var v LeaseValue
		return err == nil && json.Unmarshal(e.Value(), &v) == nil && v.Node == a.roles.Node
	})
	select {
	case <-started:
		t.Fatal("a dispatched again while its last dispatch was still stopping")
	default:
	}
	close(release)
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("a did not dispatch again once its deliveries had stopped")
	}
}

// A writer that stepped down takes the writer lease again only once its
// attempts in flight have finished: their outcomes, written once it
// writes again, would overwrite what a writer elected meanwhile stored.
// One that still holds the lease (an append failed) takes it up again at
// once: no other writer can have been elected.
func TestAWriterThatSteppedDownWaitsForItsDeliveriesToStop(t *testing.T) {
	ctx, a, _ := testCluster(t)
	started := make(chan struct{}, 4)
	stopping := make(chan chan struct{}, 4) // each stopping dispatch's release
	ended := make(chan struct{})            // the test's: the last dispatch stops at once
	a.roles.Dispatch = func(dctx context.Context) {
		started <- struct{}{}
		<-dctx.Done()
		release := make(chan struct{})
		stopping <- release
		select { // attempts in flight
		case <-release:
		case <-ended:
		}
	}
	actx, stopA := context.WithCancel(ctx)
	ran := make(chan struct{})
	go func() { defer close(ran); a.node.Run(actx, a.roles) }()
	defer func() { close(ended); stopA(); <-ran }()
	recv := func(what string) {
		t.Helper()
		select {
		case <-started:
		case <-time.After(30 * time.Second):
			t.Fatalf("a did not %s", what)
		}
	}
	drain := func() chan struct{} {
		t.Helper()
		select {
		case release := <-stopping:
			return release
		case <-time.After(30 * time.Second):
			t.Fatal("a did not stop dispatching")
			return nil
		}
	}
	recv("dispatch")

	// Another node took the writer lease for a moment: a steps down.
	expires := time.Now().Add(2 * time.Second)
	forged, _ := json.Marshal(LeaseValue{Node: "x", Addr: "x:1", Expires: expires.UnixMilli()})
	if _, err := a.node.kv.Put(ctx, a.node.writer.key, forged); err != nil {
		t.Fatal(err)
	}
	release := drain()
	// The lease is free again, by a's clock, for two TTLs of its role
	// loop's ticks (which the heartbeat keeps pace with).
	beats := func() uint64 {
		e, err := a.node.kv.Get(ctx, "heartbeat_"+hex.EncodeToString([]byte(a.roles.Node)))
		if err != nil {
			return 0
		}
		return e.Revision()
	}
	waitUntil(t, 20*time.Second, "the other node's lease to run out", func() bool { return time.Now().After(expires) })
	from := beats()
	waitUntil(t, 20*time.Second, "eight heartbeats", func() bool { return beats() >= from+8 }) // the bucket's only writes now
	if a.node.IsWriter() {
		t.Fatal("a took the writer lease again while its attempts in flight were still going")
	}
	close(release)
	waitUntil(t, 30*time.Second, "a to be the writer again once they stopped", func() bool { return a.node.IsWriter() })
	recv("dispatch again")

	// While its attempts finish after it lost the dispatcher lease, an
	// append fails: a steps down, holding the writer lease, and takes it
	// up again behind a fence without waiting for them.
	forged, _ = json.Marshal(LeaseValue{Node: "x", Addr: "x:1", Expires: time.Now().Add(time.Hour).UnixMilli()})
	if _, err := a.node.kv.Put(ctx, a.node.dispatcher.key, forged); err != nil {
		t.Fatal(err)
	}
	release = drain()
	a.node.writable.Store(false)
	waitUntil(t, 30*time.Second, "a to write again, holding its lease, while its attempts finish", func() bool { return a.node.IsWriter() })
	if err := a.node.kv.Delete(ctx, a.node.dispatcher.key); err != nil {
		t.Fatal(err)
	}
	close(release)
	recv("dispatch again")
}

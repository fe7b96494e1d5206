package http

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"demosvc/config"
	"demosvc/eventlog"
	"demosvc/projections"
	"demosvc/projections/projtest"
)

// benchStack is the whole server on a real Pebble, with an unlimited
// account whose key the benchmark uses.
type benchStack struct {
	url, key  string
	accountID string
	sessions  []string
	agentID   string
	state     *projections.Projections
	commits   atomic.Int64 // group commits of the log (pipelined: several may share an fsync)
	records   atomic.Int64 // records they carried
}

func newBenchStack(b *testing.B, synthetic int) *benchStack {
	b.Helper()
	store, err := eventlog.OpenStore(b.TempDir(), eventlog.StoreOptions{Create: true})
	if err != nil {
		b.Fatal(err)
	}
	bs := &benchStack{}
	log, err := eventlog.OpenLog(store, eventlog.Options{Registry: projections.NewRegistry(), IDs: eventlog.NewIDs(time.Now),
		OnCommit: func(n int) { bs.commits.Add(1); bs.records.Add(int64(n)) }})
	if err != nil {
		b.Fatal(err)
	}
	if synthetic > 0 {
		start := time.Now()
		bs.accountID, bs.sessions, err = projtest.Synthetic(log, projtest.BenchShape(synthetic))
		if err != nil {
			b.Fatal(err)
		}
		b.Logf("loaded %d sessions (%d events) in %v", synthetic, log.DurableSeq(), time.Since(start))
	}
	state, err := projections.Open(log, projections.DefaultOptions)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { state.Close(); log.Close(); store.Close() })
	bs.state = state
	ctx := b.Context()
	if bs.accountID == "" {
		acc, err := state.CreateAccount(ctx, "cli", "Bench", projections.PlanEnterprise, 0)
		if err != nil {
			b.Fatal(err)
		}
		bs.accountID = acc.ID
	}
	key, err := state.CreateKey(ctx, "cli", bs.accountID)
	if err != nil {
		b.Fatal(err)
	}
	bs.key = key.Key
	pr := projections.Principal{Account: projections.Account{ID: bs.accountID}, KeyID: key.ID}
	ag, err := state.CreateAgent(ctx, pr, projections.AgentInput{Name: "Bench", SandboxURL: "https://s.example.com"}, nil)
	if err != nil {
		b.Fatal(err)
	}
	bs.agentID = ag.(projections.AgentView).ID
	if len(bs.sessions) == 0 {
		v, err := state.StartSession(ctx, pr, projections.SessionInput{AgentID: bs.agentID, Contact: &projections.Contact{Name: "P", Email: "p@example.com"}}, nil)
		if err != nil {
			b.Fatal(err)
		}
		var ses struct{ ID string }
		if err := json.Unmarshal(v.(json.RawMessage), &ses); err != nil {
			b.Fatal(err)
		}
		bs.sessions = []string{ses.ID}
	}
	srv := NewServer(Deps{Log: log, State: state, Config: config.Default(), Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	hs := httptest.NewServer(srv)
	b.Cleanup(hs.Close)
	bs.url = hs.URL
	return bs
}

func (bs *benchStack) get(b *testing.B, path string) []byte {
	req, _ := http.NewRequest("GET", bs.url+path, nil)
	req.Header.Set("Authorization", "Bearer "+bs.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		b.Fatalf("GET %s: %d %s", path, resp.StatusCode, body)
	}
	return body
}

// BenchmarkGetSessionVsBare: GET /v1/sessions/{id} through the whole stack
// against a bare handler serving the same bytes. Target: ratio >= 0.85.
func BenchmarkGetSessionVsBare(b *testing.B) {
	bs := newBenchStack(b, 0)
	path := "/v1/sessions/" + bs.sessions[0]
	compareWithBare(b, bs.url+path, bs.key, bs.get(b, path))
}

// BenchmarkListSessionsVsBare: GET /v1/sessions?limit=20 with
// projtest.BenchSessions() sessions loaded, against a bare handler serving the same
// bytes. Target: ratio >= 0.60 at 1,000,000.
func BenchmarkListSessionsVsBare(b *testing.B) {
	bs := newBenchStack(b, projtest.BenchSessions())
	path := "/v1/sessions?limit=20"
	compareWithBare(b, bs.url+path, bs.key, bs.get(b, path))
}

// BenchmarkCreateSessionVsRawPebble: POST /v1/sessions from 64 concurrent
// clients over loopback, each acknowledged only after its fsync, against
// 64 goroutines committing a batch of the same size to a raw Pebble with
// Commit(Sync). Target: ratio >= 0.60. Reports p50 and p99 latency.
func BenchmarkCreateSessionVsRawPebble(b *testing.B) {
	const clients = 64
	bs := newBenchStack(b, 0)
	body := []byte(`{"agent_id":"` + bs.agentID + `","contact":{"name":"Pat Lee","email":"pat@example.com","company":"Globex"}}`)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
	defer client.CloseIdleConnections()

	raw, err := pebble.Open(b.TempDir(), &pebble.Options{Logger: quietPebble{}})
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()
	value := bytes.Repeat([]byte("x"), 420) // about a session.started record and its share of the batch

	// The fair baseline: the same HTTP path, a bare handler that reads the
	// body and commits one batch of the same size with Commit(Sync) before
	// answering the same bytes.
	var bareKey atomic.Uint64
	resp201 := []byte(`{"id":"ses_01m7yzmhg082f2rsf1z8xs2hpp","status":"in_progress"}`)
	bare := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		k := make([]byte, 9)
		k[0] = 'b'
		binary.BigEndian.PutUint64(k[1:], bareKey.Add(1))
		batch := raw.NewBatch()
		batch.Set(k, value, nil)
		if err := batch.Commit(pebble.Sync); err != nil {
			b.Error(err)
		}
		batch.Close()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		w.Write(resp201)
	}))
	defer bare.Close()
	postTo := func(url string) func() time.Duration {
		return func() time.Duration {
			start := time.Now()
			req, _ := http.NewRequest("POST", url+"/v1/sessions", bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+bs.key)
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			if err != nil {
				b.Error(err)
				return 0
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusCreated {
				b.Errorf("status %d", resp.StatusCode)
			}
			return time.Since(start)
		}
	}
	post := postTo(bs.url)
	postBare := postTo(bare.URL)
	var rawKey atomic.Uint64
	commit := func() time.Duration {
		start := time.Now()
		k := make([]byte, 9)
		k[0] = 'l'
		binary.BigEndian.PutUint64(k[1:], rawKey.Add(1))
		batch := raw.NewBatch()
		batch.Set(k, value, nil)
		if err := batch.Commit(pebble.Sync); err != nil {
			b.Error(err)
		}
		batch.Close()
		return time.Since(start)
	}
	run := func(n int, op func() time.Duration) (time.Duration, []time.Duration) {
		var next atomic.Int64
		var mu sync.Mutex
		var lat []time.Duration
		var wg sync.WaitGroup
		start := time.Now()
		for c := 0; c < clients; c++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var mine []time.Duration
				for next.Add(1) <= int64(n) {
					mine = append(mine, op())
				}
				mu.Lock()
				lat = append(lat, mine...)
				mu.Unlock()
			}()
		}
		wg.Wait()
		return time.Since(start), lat
	}
	run(clients*4, post)
	run(clients*4, postBare)
	run(clients*4, commit)
	b.ResetTimer()
	var tAPI, tBare, tRaw time.Duration
	var latAPI []time.Duration
	for done := 0; done < b.N; {
		n := min(2000, b.N-done)
		d, lat := run(n, post)
		tAPI += d
		latAPI = append(latAPI, lat...)
		d, _ = run(n, postBare)
		tBare += d
		d, _ = run(n, commit)
		tRaw += d
		done += n
	}
	b.StopTimer()
	b.ReportMetric(float64(bs.records.Load())/float64(bs.commits.Load()), "records/group")
	sort.Slice(latAPI, func(i, j int) bool { return latAPI[i] < latAPI[j] })
	apiRate := float64(b.N) / tAPI.Seconds()
	rawRate := float64(b.N) / tRaw.Seconds()
	b.ReportMetric(apiRate, "api-req/s")
	b.ReportMetric(rawRate, "raw-commits/s")
	bareRate := float64(b.N) / tBare.Seconds()
	b.ReportMetric(apiRate/rawRate, "ratio")
	b.ReportMetric(bareRate, "bare-http+commit-req/s")
	b.ReportMetric(apiRate/bareRate, "ratio-vs-bare-http+commit")
	b.ReportMetric(float64(latAPI[len(latAPI)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(latAPI[len(latAPI)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(0, "ns/op")
}

// quietPebble keeps Pebble's informational lines out of benchmark output.
type quietPebble struct{}

func (quietPebble) Infof(string, ...any)      {}
func (quietPebble) Errorf(f string, a ...any) { slog.Error(fmt.Sprintf(f, a...)) }
func (quietPebble) Fatalf(f string, a ...any) { panic(fmt.Sprintf(f, a...)) }

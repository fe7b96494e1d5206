package delivery

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"demosvc/eventlog"
	"demosvc/projections"
)

// countingReceiver answers 200 to everything and counts, recording when
// each contact's event arrived.
type countingReceiver struct {
	*httptest.Server
	n       atomic.Int64
	mu      sync.Mutex
	arrived map[string]time.Time // contact e-mail -> arrival
}

func newCountingReceiver(b *testing.B, record bool) *countingReceiver {
	cr := &countingReceiver{arrived: map[string]time.Time{}}
	cr.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if record {
			var env struct {
				Data struct {
					Contact struct{ Email string } `json:"contact"`
				} `json:"data"`
			}
			json.Unmarshal(body, &env)
			cr.mu.Lock()
			cr.arrived[env.Data.Contact.Email] = time.Now()
			cr.mu.Unlock()
		}
		cr.n.Add(1)
	}))
	b.Cleanup(cr.Close)
	return cr
}

// waitCount polls n until it reaches want, every millisecond so as not
// to blur the figure; the deadline only bounds a broken run.
func waitCount(b *testing.B, n *atomic.Int64, want int64) {
	b.Helper()
	deadline := time.Now().Add(10 * time.Minute)
	for n.Load() < want {
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d deliveries arrived in 10 minutes", n.Load(), want)
		}
		time.Sleep(time.Millisecond) // polling interval, not synchronisation
	}
}

// sessions starts n sessions with new contacts from 64 goroutines: n
// contact.created events. The first error fails the test at once.
func (w *world) sessions(tb testing.TB, agent string, from, n int) {
	tb.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Pointer[error]
	for g := 0; g < 64; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < n && failed.Load() == nil; i = int(next.Add(1)) - 1 {
				_, err := w.state.StartSession(context.Background(), w.pr, projections.SessionInput{AgentID: agent,
					Contact: &projections.Contact{Name: "P", Email: fmt.Sprintf("p%d@example.com", from+i)}}, nil)
				if err != nil {
					failed.CompareAndSwap(nil, &err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		tb.Fatalf("starting sessions: %v", *err)
	}
}

// BenchmarkDeliveries measures signed deliveries per second from the log to
// a local receiver, with 1 and with 25 webhooks (b.N deliveries in all),
// against a plain client POSTing the same number of bodies of the same
// size to the same receiver at the same concurrency (ratio), and against
// the same client sending the headers of a delivery, so that the receiver
// parses the same bytes (ratio-same-headers): the nine headers the seed
// and Standard Webhooks require cost both ends of the exchange, which a
// plain client does not pay. Target: at least
// 10,000 deliveries/s.
//
// Two more runs of one webhook say what storing the delivery state costs:
// unstored=outcomes drops the writes of attempts' outcomes, unstored=all
// every write of the delivery state (see discardingWriter). Deliveries
// are then not durable: they measure, they are not a mode.
func BenchmarkDeliveries(b *testing.B) {
	runs := []struct {
		hooks    int
		unstored string
	}{{1, ""}, {25, ""}, {1, "outcomes"}, {1, "all"}}
	for _, run := range runs {
		name := fmt.Sprintf("webhooks=%d", run.hooks)
		if run.unstored != "" {
			name += ",unstored=" + run.unstored
		}
		hooks := run.hooks
		b.Run(name, func(b *testing.B) {
			w := openWorld(b, "")
			rv := newCountingReceiver(b, false)
			for i := 0; i < hooks; i++ {
				w.register(rv.URL, "contact.created")
			}
			events := max(1, b.N/hooks)
			total := int64(events * hooks)
			w.sessions(b, w.newAgent(), 0, events)
			// The setup's writes are flushed and its garbage collected
			// now, not in whichever phase below they would land in.
			if err := w.store.Flush(); err != nil {
				b.Fatal(err)
			}
			runtime.GC()

			// Baselines: the same number of POSTs of a body of the same
			// size from a plain client at the same concurrency, first with
			// Go's default headers, then with the request headers of a
			// delivery (see deliveryHeaders).
			body := bytes.Repeat([]byte("x"), 260)
			cfg := testConfig()
			b.ResetTimer()
			bare, bareCPU := barePosts(b, rv.URL, body, nil, total, cfg.Concurrency)
			same, sameCPU := barePosts(b, rv.URL, body, deliveryHeaders(b, cfg, body), total, cfg.Concurrency)
			rv.n.Store(0)

			var mem runtime.MemStats
			runtime.ReadMemStats(&mem)
			start, cpu, allocated := time.Now(), cpuTime(b), mem.TotalAlloc
			w.startWith(cfg, nil, func(dp *Dispatcher) {
				if run.unstored != "" {
					dp.store.w = discardingWriter{stateWriter: dp.store.w, outcomesOnly: run.unstored == "outcomes"}
				}
			})
			waitCount(b, &rv.n, total)
			took, tookCPU := time.Since(start), cpuTime(b)-cpu
			runtime.ReadMemStats(&mem)
			allocated = mem.TotalAlloc - allocated
			b.StopTimer()
			rate := float64(total) / took.Seconds()
			bareRate := float64(total) / bare.Seconds()
			b.ReportMetric(rate, "deliveries/s")
			b.ReportMetric(rate/bareRate, "ratio")
			b.ReportMetric(rate/(float64(total)/same.Seconds()), "ratio-same-headers")
			// CPU per delivery, the receiver's included, which the
			// machine's other tenants blur less than the rates.
			b.ReportMetric(float64(tookCPU.Microseconds())/float64(total), "cpu-µs/delivery")
			b.ReportMetric(float64(bareCPU.Microseconds())/float64(total), "bare-cpu-µs/post")
			b.ReportMetric(float64(sameCPU.Microseconds())/float64(total), "same-headers-cpu-µs/post")
			b.ReportMetric(float64(allocated)/float64(total), "alloc-B/delivery")
			b.ReportMetric(0, "ns/op")
			if used, err := w.store.DiskUsage(eventlog.KeyspaceDelivery); err == nil {
				b.ReportMetric(float64(used)/float64(total), "disk-B/delivery")
			}
		})
	}
}

// barePosts POSTs body to url total times from concurrency goroutines,
// with Go's default headers if header is nil, else with header and no
// Accept-Encoding (as the delivery transport), and returns the time and
// CPU it took.
func barePosts(b *testing.B, url string, body []byte, header http.Header, total int64, concurrency int) (took, cpu time.Duration) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: concurrency, DisableCompression: header != nil}}
	defer client.CloseIdleConnections()
	var next atomic.Int64
	var wg sync.WaitGroup
	start, cpu0 := time.Now(), cpuTime(b)
	for c := 0; c < concurrency; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= total {
				req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
				if err != nil {
					b.Error(err)
					return
				}
				req.Header = header // read only: shared by every request
				if header == nil {
					req.Header = http.Header{"Content-Type": {"application/json"}}
				}
				resp, err := client.Do(req)
				if err != nil {
					b.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	return time.Since(start), cpuTime(b) - cpu0
}

// deliveryHeaders returns the request headers of a delivery of body, as
// setHeaders makes them for an attempt: the same names and values of the
// same length, so that a baseline sends the receiver the same bytes but
// for the signatures' digits, signed once rather than per request.
func deliveryHeaders(b *testing.B, cfg Config, body []byte) http.Header {
	h := http.Header{}
	d := Delivery{ID: "dlv_01kmtd8d8hzqehqyqf6nm2x0c5", WebhookID: "wh_01kmtd8d8hzqehqyqf6nm2x0c5",
		EventID: "evt_01kmtd8d8hzqehqyqf6nm2x0c5", Body: body}
	sg := newSigner("whsec_"+base64.StdEncoding.EncodeToString(make([]byte, 32)), "")
	if err := setHeaders(h, sg, &d, 1, time.Now().Unix(), cfg.StandardWebhooks, cfg.UserAgent, new(sentHeaders)); err != nil {
		b.Fatal(err)
	}
	return h.Clone() // not the signer's value array
}

// discardingWriter stands in for the log as the writer of the delivery
// state, for BenchmarkDeliveries only: it drops every write, or with
// outcomesOnly every write but those that move a cursor (a step's new
// deliveries), and answers at once as if each were durable.
type discardingWriter struct {
	stateWriter
	outcomesOnly bool
}

func (d discardingWriter) StartWriteSync(puts []eventlog.Put, delFrom, delTo []byte) (wait func() error) {
	if d.outcomesOnly && len(puts) > 0 && isCursorKey(puts[len(puts)-1].Key) {
		return d.stateWriter.StartWriteSync(puts, delFrom, delTo)
	}
	return func() error { return nil }
}

// isCursorKey says whether k is a webhook's cursor key: the first 0x00,
// which ends the webhook id, is followed by 'c' alone.
func isCursorKey(k []byte) bool {
	return bytes.IndexByte(k, 0) == len(k)-2 && k[len(k)-1] == 'c'
}

// cpuTime is the CPU time (user and system) this process has used.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkDeliveryLatency appends events at 1,000 a second for a webhook
// whose receiver is on loopback and reports the latency from each event's
// commit (its command returning) to its arrival. Target: p99 at most 20 ms.
func BenchmarkDeliveryLatency(b *testing.B) {
	w := openWorld(b, "")
	rv := newCountingReceiver(b, true)
	w.register(rv.URL, "contact.created")
	agent := w.newAgent()
	w.start(testConfig())
	committed := make(map[string]time.Time, b.N)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		<-tick.C
		email := fmt.Sprintf("p%d@example.com", i)
		if _, err := w.state.StartSession(b.Context(), w.pr, projections.SessionInput{AgentID: agent,
			Contact: &projections.Contact{Name: "P", Email: email}}, nil); err != nil {
			b.Fatal(err)
		}
		committed[email] = time.Now()
	}
	waitCount(b, &rv.n, int64(b.N))
	b.StopTimer()
	var lat []time.Duration
	rv.mu.Lock()
	for email, at := range rv.arrived {
		d := at.Sub(committed[email])
		lat = append(lat, max(d, 0))
	}
	rv.mu.Unlock()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkHealthyBesideDead measures a healthy webhook's deliveries per
// second alone, then with a dead receiver (it accepts and never answers)
// registered beside it for the same events. Target: the ratio within 10%
// of 1.
func BenchmarkHealthyBesideDead(b *testing.B) {
	run := func(withDead bool) float64 {
		w := openWorld(b, "")
		healthy := newCountingReceiver(b, false)
		w.register(healthy.URL, "contact.created")
		if withDead {
			quit := make(chan struct{})
			dead := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				select {
				case <-r.Context().Done():
				case <-quit:
				}
			}))
			b.Cleanup(func() { close(quit); dead.Close() })
			w.register(dead.URL, "contact.created")
		}
		w.sessions(b, w.newAgent(), 0, b.N)
		start := time.Now()
		w.start(testConfig())
		waitCount(b, &healthy.n, int64(b.N))
		rate := float64(b.N) / time.Since(start).Seconds()
		w.close()
		return rate
	}
	alone := run(false)
	beside := run(true)
	b.ReportMetric(alone, "alone-deliveries/s")
	b.ReportMetric(beside, "beside-dead-deliveries/s")
	b.ReportMetric(beside/alone, "ratio")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkWritesBesideManyWebhooks: sessions written while deliveries run
// for 500 webhooks (20 accounts of 25) that none of the writes concerns,
// against the same writes with no webhook, alternating rounds of 2,000
// sessions between the two worlds; the ratio is the median of the rounds'
// (many / none). Every write that changes no webhook must not cost a pass
// over every webhook.
func BenchmarkWritesBesideManyWebhooks(b *testing.B) {
	rv := newCountingReceiver(b, false)
	none, many := openWorld(b, ""), openWorld(b, "")
	for a := range 20 {
		acc, err := many.state.CreateAccount(b.Context(), "cli", fmt.Sprintf("Tenant %d", a), projections.PlanPro, 0)
		if err != nil {
			b.Fatal(err)
		}
		pr := projections.Principal{Account: acc, KeyID: "key_bench"}
		for range 25 {
			if _, err := many.state.RegisterWebhook(b.Context(), pr, projections.WebhookInput{URL: rv.URL, Events: []string{"meeting.booked"}}, nil); err != nil {
				b.Fatal(err)
			}
		}
	}
	const round = 2_000
	var ratios []float64
	agents := map[*world]string{none: none.newAgent(), many: many.newAgent()}
	none.start(testConfig())
	many.start(testConfig())
	b.ResetTimer()
	for i := range b.N {
		var took [2]time.Duration
		for j, w := range []*world{none, many} {
			if i%2 == 1 {
				w = []*world{many, none}[j]
				j = 1 - j
			}
			start := time.Now()
			w.sessions(b, agents[w], i*round, round)
			took[j] = time.Since(start)
		}
		ratios = append(ratios, float64(took[0])/float64(took[1]))
	}
	b.StopTimer()
	sort.Float64s(ratios)
	b.ReportMetric(ratios[len(ratios)/2], "many/none")
}

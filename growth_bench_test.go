package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"demosvc/eventlog"
	"demosvc/projections"
	"demosvc/projections/projtest"
)

// The growth benchmarks run the built binary as its own process, with its
// production settings (timeouts on, a text log at warn to a file), and
// drive it over real TCP from 64 keep-alive connections: what a client
// sees, not what an in-process caller does.

// growthClients is the number of concurrent connections of the load.
const growthClients = 64

// benchDeliveries is how many deliveries BenchmarkCreateAsDeliveriesGrow
// lets accumulate: 1,000,000, or DEMOSVC_BENCH_DELIVERIES (CI runs it
// small).
func benchDeliveries() int {
	if n, err := strconv.Atoi(os.Getenv("DEMOSVC_BENCH_DELIVERIES")); err == nil && n > 0 {
		return n
	}
	return 1_000_000
}

// buildBinary builds the binary the benchmarks run, once per benchmark.
func buildBinary(b *testing.B) string {
	b.Helper()
	bin := filepath.Join(b.TempDir(), "demosvc")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// served is a `demosvc serve` process on a data dir.
type served struct {
	cmd    *exec.Cmd
	url    string
	key    string
	client *http.Client
}

// cliJSON runs a command of the binary and decodes its JSON output.
func cliJSON(b *testing.B, bin string, out any, args ...string) {
	b.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = withoutBenchEnv(os.Environ())
	raw, err := cmd.Output()
	if err != nil {
		b.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, raw)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		b.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, raw)
	}
}

// serveBench starts `demosvc serve` on dir with a new API key of account
// (made as an enterprise account, which has no rate limit, when account is
// ""), and waits until it is ready.
func serveBench(b *testing.B, bin, dir, account string) *served {
	b.Helper()
	if account == "" {
		var acc struct{ ID string }
		cliJSON(b, bin, &acc, "accounts", "create", "--name", "Bench", "--plan", "enterprise", "--data", dir)
		account = acc.ID
	}
	var key struct{ Key string }
	cliJSON(b, bin, &key, "keys", "create", "--account", account, "--data", dir)
	logFile, err := os.Create(dir + ".log")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { logFile.Close() })
	cmd := exec.Command(bin, "serve", "--data", dir, "--listen", "127.0.0.1:0")
	cmd.Env = append(withoutBenchEnv(os.Environ()), "DEMOSVC_LOG_LEVEL=warn", "DEMOSVC_DELIVERY_ALLOW_PRIVATE_NETWORKS=true")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	s := &served{cmd: cmd, key: key.Key,
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: growthClients}}}
	b.Cleanup(func() { s.stop(b) })
	deadline := time.Now().Add(5 * time.Minute)
	for {
		if url, ok := serverReady(dir); ok {
			s.url = url
			return s
		}
		if time.Now().After(deadline) {
			b.Fatalf("server on %s not ready after 5 minutes", dir)
		}
		time.Sleep(20 * time.Millisecond) // polling interval, not synchronisation
	}
}

// stop ends the server with SIGTERM and waits for it.
func (s *served) stop(b *testing.B) {
	if s.cmd.ProcessState != nil {
		return
	}
	s.client.CloseIdleConnections()
	s.cmd.Process.Signal(os.Interrupt)
	s.cmd.Wait()
}

// rssMiB is the server's resident memory now and at its peak.
func (s *served) rssMiB() (now, peak float64) {
	status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	for _, line := range strings.Split(string(status), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case "VmRSS:":
			now = kb / 1024
		case "VmHWM:":
			peak = kb / 1024
		}
	}
	return now, peak
}

// cpu is the CPU time the server has used so far.
func (s *served) cpu() time.Duration {
	stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.cmd.Process.Pid))
	// Fields after the command's closing parenthesis; utime and stime are
	// the 12th and 13th of them, in clock ticks (100 a second on Linux).
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// storeBytes reads from /metrics the table bytes the server's store has
// flushed and compacted since it started.
func (s *served) storeBytes(b *testing.B) (flushed, compacted float64) {
	b.Helper()
	resp, err := s.client.Get(s.url + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	found := 0
	for _, line := range strings.Split(string(raw), "\n") {
		name, v, _ := strings.Cut(line, " ")
		switch name {
		case "demosvc_store_flushed_bytes_total":
			flushed, err = strconv.ParseFloat(v, 64)
		case "demosvc_store_compacted_bytes_total":
			compacted, err = strconv.ParseFloat(v, 64)
		default:
			continue
		}
		if err != nil {
			b.Fatalf("/metrics: %s: %v", line, err)
		}
		found++
	}
	if found != 2 {
		b.Fatalf("/metrics has %d of the store's two byte counters", found)
	}
	return flushed, compacted
}

// idle waits until the server uses under 5% of a core over a second (its
// compactions and snapshots done), for at most 10 minutes, and says how
// long that took.
func (s *served) idle(b *testing.B) time.Duration {
	b.Helper()
	began := time.Now()
	for {
		cpu0 := s.cpu()
		time.Sleep(time.Second) // the window measured, not synchronisation
		if s.cpu()-cpu0 <= 50*time.Millisecond {
			return time.Since(began)
		}
		if time.Since(began) > 10*time.Minute {
			b.Fatalf("the server still busy after 10 minutes")
		}
	}
}

// call sends one API request and decodes a 2xx answer into out.
func (s *served) call(b *testing.B, method, path, body string, out any) {
	b.Helper()
	req, _ := http.NewRequest(method, s.url+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+s.key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		b.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			b.Fatal(err)
		}
	}
}

// creator posts sessions with contacts new to the account.
type creator struct {
	s     *served
	agent string
	tag   string       // makes e-mails unique across data dirs
	n     atomic.Int64 // sessions created
}

func newCreator(b *testing.B, s *served) *creator {
	var ag struct{ ID string }
	s.call(b, "POST", "/v1/agents", `{"name":"Bench","sandbox_url":"https://sandbox.example.com/a"}`, &ag)
	return &creator{s: s, agent: ag.ID, tag: strconv.FormatInt(time.Now().UnixNano(), 36)}
}

// run creates sessions from growthClients connections until until says
// stop (it is asked before each request), and returns how many it created
// and how long that took.
func (c *creator) run(b *testing.B, until func() bool) (int64, time.Duration) {
	var done atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for g := 0; g < growthClients; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var body bytes.Buffer
			for !until() {
				i := c.n.Add(1)
				body.Reset()
				fmt.Fprintf(&body, `{"agent_id":%q,"contact":{"name":"Pat Lee","email":"bench-%s-%d@example.com","company":"Globex"}}`, c.agent, c.tag, i)
				req, _ := http.NewRequest("POST", c.s.url+"/v1/sessions", bytes.NewReader(body.Bytes()))
				req.Header.Set("Authorization", "Bearer "+c.s.key)
				req.Header.Set("Content-Type", "application/json")
				resp, err := c.s.client.Do(req)
				if err != nil {
					b.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusCreated {
					b.Errorf("POST /v1/sessions: %d", resp.StatusCode)
					return
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
	return done.Load(), time.Since(start)
}

// rate runs rounds timed rounds of d and returns their median rate, and
// the median CPU time the server spent per request, settle (which waits
// for the deliveries to catch up) included. The CPU figure is the steadier
// one on a machine shared with other work.
func (c *creator) rate(b *testing.B, rounds int, d time.Duration, settle func()) (perSec float64, cpuPerReq time.Duration) {
	var rates []float64
	var cpus []time.Duration
	for range rounds {
		if settle != nil {
			settle()
		}
		cpu0 := c.s.cpu()
		end := time.Now().Add(d)
		n, took := c.run(b, func() bool { return time.Now().After(end) })
		if settle != nil {
			settle()
		}
		rates = append(rates, float64(n)/took.Seconds())
		cpus = append(cpus, (c.s.cpu()-cpu0)/time.Duration(max(n, 1)))
	}
	sort.Float64s(rates)
	sort.Slice(cpus, func(i, j int) bool { return cpus[i] < cpus[j] })
	b.Logf("rounds: %.0f req/s, server CPU per request %v", rates, cpus)
	return rates[len(rates)/2], cpus[len(cpus)/2]
}

// growthRound is how long each measured round lasts, and growthRounds is
// how many rounds BenchmarkCreateAsDeliveriesGrow measures at the start
// and again after: the rounds of one run spread by ±11–15% about their
// median on a shared machine, and the median of five moves less than that
// of three.
const (
	growthRound  = 4 * time.Second
	growthRounds = 5
)

// BenchmarkCreateAsDeliveriesGrow measures POST /v1/sessions, each with a
// new contact (a contact.created event) and one webhook subscribed to
// contact.created on a fast loopback receiver: the rate at the start, and
// again after benchDeliveries() deliveries have accumulated, in one run.
// Before each round the deliveries have caught up, so that the rounds at
// the start and after carry the same delivery work. Target: ratio at
// least 0.9.
//
// The rounds after run twice: at once (ratio), while Pebble still
// compacts what the million requests before them wrote in a minute or
// two, and again once the server is idle (ratio-idle): the store as a
// million deliveries leave it when they came over hours, its compactions
// caught up. The first is the harder figure; the second is the slowdown
// that stays.
func BenchmarkCreateAsDeliveriesGrow(b *testing.B) {
	bin := buildBinary(b)
	var got atomic.Int64
	rv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		got.Add(1)
	}))
	defer rv.Close()
	dir := filepath.Join(b.TempDir(), "data")
	s := serveBench(b, bin, dir, "")
	s.call(b, "POST", "/v1/webhooks", `{"url":"`+rv.URL+`/hook","events":["contact.created"]}`, nil)
	c := newCreator(b, s)
	caughtUp := func() {
		deadline := time.Now().Add(30 * time.Minute)
		for got.Load() < c.n.Load()-growthClients { // requests cut off by a round's end may not have committed
			if time.Now().After(deadline) {
				b.Fatalf("%d of %d deliveries arrived in 30 minutes", got.Load(), c.n.Load())
			}
			time.Sleep(10 * time.Millisecond) // polling interval, not synchronisation
		}
	}
	// rounds also returns what the store flushed and compacted during the
	// rounds, per request: what the storage's own work does as it grows.
	rounds := func() (rate float64, cpu time.Duration, flushed, compacted float64) {
		n0 := c.n.Load()
		f0, c0 := s.storeBytes(b)
		rate, cpu = c.rate(b, growthRounds, growthRound, caughtUp)
		f1, c1 := s.storeBytes(b)
		n := float64(max(c.n.Load()-n0, 1))
		return rate, cpu, (f1 - f0) / n, (c1 - c0) / n
	}
	total := int64(benchDeliveries())
	for b.Loop() {
		_, compacted0 := s.storeBytes(b)
		start, startCPU, startFlushed, startCompacted := rounds()
		began := time.Now()
		c.run(b, func() bool { return c.n.Load() >= total })
		caughtUp()
		b.Logf("%d sessions created and delivered in %v", c.n.Load(), time.Since(began).Round(time.Second))
		after, afterCPU, afterFlushed, afterCompacted := rounds()
		b.Logf("idle after %v", s.idle(b).Round(time.Second))
		idle, idleCPU, _, idleCompacted := rounds()
		rss, peak := s.rssMiB()
		b.ReportMetric(idle/start, "ratio-idle")
		b.ReportMetric(float64(idleCPU.Microseconds()), "idle-CPU-µs/req")
		b.ReportMetric(idleCompacted, "idle-compacted-B/req")
		b.ReportMetric(start, "start-req/s")
		b.ReportMetric(after, "after-req/s")
		b.ReportMetric(after/start, "ratio")
		b.ReportMetric(float64(startCPU.Microseconds()), "start-CPU-µs/req")
		b.ReportMetric(float64(afterCPU.Microseconds()), "after-CPU-µs/req")
		b.ReportMetric(startFlushed, "start-flushed-B/req")
		b.ReportMetric(afterFlushed, "after-flushed-B/req")
		b.ReportMetric(startCompacted, "start-compacted-B/req")
		b.ReportMetric(afterCompacted, "after-compacted-B/req")
		_, compacted := s.storeBytes(b)
		b.ReportMetric((compacted-compacted0)/float64(c.n.Load()), "compacted-B/req")
		b.ReportMetric(float64(got.Load()), "deliveries")
		b.ReportMetric(rss, "RSS-MiB")
		b.ReportMetric(peak, "peak-RSS-MiB")
	}
	b.ReportMetric(0, "ns/op")
}

// BenchmarkCreateAsSessionsGrow measures POST /v1/sessions with new
// contacts and no webhook on a data dir holding 10,000 sessions and on one
// holding projtest.BenchSessions() (1,000,000), written as a synthetic log
// before the server starts. Target: ratio at least 0.9.
func BenchmarkCreateAsSessionsGrow(b *testing.B) {
	bin := buildBinary(b)
	open := func(sessions int) *creator {
		dir := filepath.Join(b.TempDir(), "data")
		store, err := eventlog.OpenStore(dir, eventlog.StoreOptions{Create: true, Logger: quietLogger()})
		if err != nil {
			b.Fatal(err)
		}
		log, err := eventlog.OpenLog(store, eventlog.Options{Registry: projections.NewRegistry(), IDs: eventlog.NewIDs(time.Now)})
		if err != nil {
			b.Fatal(err)
		}
		account, _, err := projtest.Synthetic(log, projtest.BenchShape(sessions))
		if err != nil {
			b.Fatal(err)
		}
		if err := errors.Join(log.Close(), store.Close()); err != nil {
			b.Fatal(err)
		}
		return newCreator(b, serveBench(b, bin, dir, account))
	}
	small := open(10_000)
	large := open(projtest.BenchSessions())
	for b.Loop() {
		// Alternating rounds, so that noise on a shared machine hits both.
		var rs, rl []float64
		var cs, cl []time.Duration
		for range 3 {
			r, c := small.rate(b, 1, growthRound, nil)
			rs, cs = append(rs, r), append(cs, c)
			r, c = large.rate(b, 1, growthRound, nil)
			rl, cl = append(rl, r), append(cl, c)
		}
		sort.Float64s(rs)
		sort.Float64s(rl)
		sort.Slice(cs, func(i, j int) bool { return cs[i] < cs[j] })
		sort.Slice(cl, func(i, j int) bool { return cl[i] < cl[j] })
		b.ReportMetric(rs[1], "10k-req/s")
		b.ReportMetric(rl[1], "large-req/s")
		b.ReportMetric(rl[1]/rs[1], "ratio")
		b.ReportMetric(float64(cs[1].Microseconds()), "10k-CPU-µs/req")
		b.ReportMetric(float64(cl[1].Microseconds()), "large-CPU-µs/req")
		_, peak := large.s.rssMiB()
		b.ReportMetric(peak, "large-peak-RSS-MiB")
	}
	b.ReportMetric(0, "ns/op")
}

package projections_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"demosvc/eventlog"
	"demosvc/projections"
	"demosvc/projections/projtest"
)

// BenchmarkReadLatencyDuringSnapshots measures what a request's reads wait
// for while snapshots are taken, with projtest.BenchSessions() sessions
// loaded: two readers each authenticate a key and read a random session,
// one read every readEvery as requests arrive (back to back, they would
// measure the scheduler sharing two cores with the encoder rather than
// the locks), while a writer progresses random sessions back to back. The baseline,
// in the same run, is the same load for the same time without snapshots.
// Snapshots are taken back to back, twice: only encoded (the part that
// reads the state) and saved whole (encoded, then written and synced).
// Target: read p99 during snapshots at most 2x the p99 without.
func BenchmarkReadLatencyDuringSnapshots(b *testing.B) {
	const readEvery = 500 * time.Microsecond
	dir := b.TempDir()
	store, err := eventlog.OpenStore(dir, eventlog.StoreOptions{Create: true})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	log, err := eventlog.OpenLog(store, eventlog.Options{Registry: projections.NewRegistry(), IDs: eventlog.NewIDs(time.Now)})
	if err != nil {
		b.Fatal(err)
	}
	defer log.Close()
	account, sessions, err := projtest.Synthetic(log, projtest.BenchShape(projtest.BenchSessions()))
	if err != nil {
		b.Fatal(err)
	}
	p, err := projections.Open(log, projections.DefaultOptions)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	ctx := context.Background()
	key, err := p.CreateKey(ctx, "cli", account)
	if err != nil {
		b.Fatal(err)
	}
	pr := projections.Principal{Account: projections.Account{ID: account}, KeyID: key.ID}

	// measure runs the load until stop is closed and returns every read's
	// latency and how many writes were acknowledged.
	measure := func(stop <-chan struct{}) (lat []time.Duration, writes int64) {
		var mu sync.Mutex
		var wg sync.WaitGroup
		var acked atomic.Int64
		wg.Add(3)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(1, 2))
			score := 10
			for {
				select {
				case <-stop:
					return
				default:
				}
				// Refused for ended sessions, accepted for the others: both
				// take the writer's lock.
				p.ProgressSession(ctx, pr, sessions[rng.IntN(len(sessions))], projections.Figures{IntentScore: &score}, nil)
				acked.Add(1)
			}
		}()
		for r := range 2 {
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(r), 3))
				var mine []time.Duration
				tick := time.NewTicker(readEvery)
				defer tick.Stop()
				for {
					select {
					case <-stop:
						mu.Lock()
						lat = append(lat, mine...)
						mu.Unlock()
						return
					case <-tick.C:
					}
					start := time.Now()
					if _, ok := p.Authenticate(key.Key); !ok {
						b.Error("the key does not authenticate")
					}
					if _, err := p.SessionJSON(nil, account, sessions[rng.IntN(len(sessions))]); err != nil {
						b.Error(err)
					}
					mine = append(mine, time.Since(start))
				}
			}()
		}
		<-stop
		wg.Wait()
		slices.Sort(lat)
		return lat, acked.Load()
	}
	pct := func(lat []time.Duration, q float64) time.Duration {
		if len(lat) == 0 {
			return 0
		}
		return lat[min(len(lat)-1, int(float64(len(lat))*q))]
	}

	const snapshotsPerRun = 5
	// during runs the load while take runs snapshotsPerRun times, and
	// returns the reads' latencies and how long one take lasted.
	during := func(take func() error) ([]time.Duration, time.Duration) {
		stop := make(chan struct{})
		var lat []time.Duration
		done := make(chan struct{})
		go func() {
			lat, _ = measure(stop)
			close(done)
		}()
		start := time.Now()
		for range snapshotsPerRun {
			if err := take(); err != nil {
				b.Fatal(err)
			}
		}
		took := time.Since(start)
		close(stop)
		<-done
		return lat, took / snapshotsPerRun
	}
	var p99Without, p99Encode, p99Save, maxWithout, maxEncode, maxSave, encodeTook, saveTook time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		encoding, took := during(func() error { return projections.EncodeSnapshot(p) })
		encodeTook += took
		saving, took := during(func() error { _, err := p.SaveSnapshot(); return err })
		saveTook += took

		// Without: the same load for as long as the saves took.
		stop := make(chan struct{})
		timer := time.AfterFunc(took*snapshotsPerRun, func() { close(stop) })
		without, _ := measure(stop)
		timer.Stop()

		p99Without += pct(without, 0.99)
		p99Encode += pct(encoding, 0.99)
		p99Save += pct(saving, 0.99)
		maxWithout = max(maxWithout, without[len(without)-1])
		maxEncode = max(maxEncode, encoding[len(encoding)-1])
		maxSave = max(maxSave, saving[len(saving)-1])
	}
	n := time.Duration(b.N)
	us := func(d time.Duration) float64 { return float64(d.Microseconds()) }
	b.ReportMetric(us(p99Without/n), "p99-us-without")
	b.ReportMetric(us(p99Encode/n), "p99-us-encoding")
	b.ReportMetric(us(p99Save/n), "p99-us-saving")
	b.ReportMetric(float64(p99Encode)/float64(p99Without), "p99-ratio-encoding")
	b.ReportMetric(float64(p99Save)/float64(p99Without), "p99-ratio-saving")
	b.ReportMetric(us(maxWithout), "max-us-without")
	b.ReportMetric(us(maxEncode), "max-us-encoding")
	b.ReportMetric(us(maxSave), "max-us-saving")
	b.ReportMetric((encodeTook / n).Seconds(), "s/encode")
	b.ReportMetric((saveTook / n).Seconds(), "s/save")
	b.ReportMetric(0, "ns/op")
}

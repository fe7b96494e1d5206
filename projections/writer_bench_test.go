package projections

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/vmihailenco/msgpack/v5"

	"demosvc/eventlog"
)

// BenchmarkWriterAppend measures the write path the binary runs: concurrent
// commands through Do, each deciding one event of about 300 bytes, grouped
// by the writer into one Txn and one fsync. Its baseline, in the same run,
// is raw Pebble: the same number of goroutines each committing one value of
// the same size with Batch.Commit(Sync), which Pebble groups into shared
// fsyncs by itself. Compare writer/N against rawpebble/N.
func BenchmarkWriterAppend(b *testing.B) {
	persona := strings.Repeat("benchmark persona 0123456789 ", 8)[:200]
	var size atomic.Int64
	for _, n := range []int{1, 16, 256} {
		b.Run(fmt.Sprintf("writer/appenders=%d", n), func(b *testing.B) {
			e := openBenchEnv(b)
			pr := Principal{Account: mustAccount(b, e), KeyID: "key_bench"}
			v, err := e.CreateAgent(context.Background(), pr, AgentInput{Name: "bench", SandboxURL: "https://sandbox.example.com/"}, nil)
			if err != nil {
				b.Fatal(err)
			}
			agentID := v.(AgentView).ID
			start := e.log.DurableSeq()
			runSpread(b, n, "appends/s", func(uint64) error {
				_, err := e.UpdateAgent(context.Background(), pr, agentID, AgentPatch{Persona: &persona})
				return err
			})
			if got := e.log.DurableSeq() - start; got != uint64(b.N) {
				b.Fatalf("the log grew by %d records for %d commands", got, b.N)
			}
			size.Store(int64(lastValueSize(b, e.log)))
			b.ReportMetric(float64(size.Load()), "B/value")
		})
		b.Run(fmt.Sprintf("rawpebble/writers=%d", n), func(b *testing.B) {
			if size.Load() == 0 {
				b.Skip("runs after writer/appenders=N, which measures the value size")
			}
			value := bytes.Repeat([]byte{0x5a}, int(size.Load()))
			db, err := pebble.Open(b.TempDir(), &pebble.Options{Logger: quietPebble{}})
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			runSpread(b, n, "appends/s", func(i uint64) error {
				batch := db.NewBatch()
				defer batch.Close()
				key := binary.BigEndian.AppendUint64([]byte{'l'}, i)
				if err := batch.Set(key, value, nil); err != nil {
					return err
				}
				return batch.Commit(pebble.Sync)
			})
			b.ReportMetric(float64(len(value)), "B/value")
		})
	}
}

func openBenchEnv(b *testing.B) *Projections {
	b.Helper()
	store, err := eventlog.OpenStore(b.TempDir(), eventlog.StoreOptions{Create: true})
	if err != nil {
		b.Fatal(err)
	}
	log, err := eventlog.OpenLog(store, eventlog.Options{Registry: NewRegistry(), IDs: eventlog.NewIDs(time.Now)})
	if err != nil {
		b.Fatal(err)
	}
	p, err := Open(log, DefaultOptions)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { p.Close(); log.Close(); store.Close() })
	return p
}

func mustAccount(b *testing.B, p *Projections) Account {
	b.Helper()
	a, err := p.CreateAccount(context.Background(), "cli", "bench", PlanPro, 0)
	if err != nil {
		b.Fatal(err)
	}
	return a
}

// lastValueSize is about the size of the last record as stored: its
// envelope and payload as a msgpack array, and its chain hash.
func lastValueSize(b *testing.B, log *eventlog.Log) int {
	b.Helper()
	head := log.DurableSeq()
	n := 0
	err := log.Read(head, head, func(r *eventlog.Record) error {
		v, err := msgpack.Marshal([]any{r.Seq, r.ID, r.Type, r.Version, r.Time, r.Account, r.Actor, r.Payload, r.Hash[:]})
		n = len(v)
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	return n
}

// runSpread runs op b.N times in total, spread over workers goroutines that
// take the next operation number from a shared counter, and reports the
// throughput as unit.
func runSpread(b *testing.B, workers int, unit string, op func(i uint64) error) {
	b.Helper()
	var next atomic.Uint64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	b.ReportAllocs()
	b.ResetTimer()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > uint64(b.N) {
					return
				}
				if err := op(i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), unit)
}

// quietPebble drops Pebble's informational messages from benchmark output.
type quietPebble struct{}

func (quietPebble) Infof(string, ...any)         {}
func (quietPebble) Errorf(f string, args ...any) { panic(fmt.Sprintf(f, args...)) }
func (quietPebble) Fatalf(f string, args ...any) { panic(fmt.Sprintf(f, args...)) }

package eventlog

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// benchText makes the event's payload about 200 bytes.
var benchText = strings.Repeat("benchmark payload 0123456789 ", 7)[:200]

func benchEvent(i uint64) []Event {
	return []Event{{Account: "acc_01jd2q8mzbench", Actor: "key_01jd2q8mzbench", Payload: note{Text: benchText, N: int(i)}}}
}

func openBenchLog(b *testing.B) *Log {
	b.Helper()
	store, err := OpenStore(b.TempDir(), StoreOptions{Create: true})
	if err != nil {
		b.Fatal(err)
	}
	log, err := OpenLog(store, Options{Registry: testRegistry(), IDs: NewIDs(time.Now)})
	if err != nil {
		store.Close()
		b.Fatal(err)
	}
	b.Cleanup(func() {
		log.Close()
		store.Close()
	})
	return log
}

const replayRecords = 200_000

// openReplayStore fills a new log with replayRecords benchmark events,
// compacts it, and returns it ready to read.
func openReplayStore(b *testing.B) *Log {
	b.Helper()
	log := openBenchLog(b)
	const perAppend = 1000
	events := make([]Event, perAppend)
	for seq := uint64(0); seq < replayRecords; seq += perAppend {
		for i := range events {
			events[i] = benchEvent(seq + uint64(i))[0]
		}
		if _, err := appendTx(log, events); err != nil {
			b.Fatal(err)
		}
	}
	if err := log.db.db.Compact(context.Background(), []byte{prefixLog}, []byte{prefixLog + 1}, true); err != nil {
		b.Fatal(err)
	}
	return log
}

func BenchmarkReplay(b *testing.B) {
	log := openReplayStore(b)
	reg := log.Registry()
	b.Run(fmt.Sprintf("records=%d", replayRecords), func(b *testing.B) {
		var last any
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			n := 0
			err := log.Read(1, 0, func(rec *Record) error {
				v, err := reg.DecodeStored(rec)
				if err != nil {
					return err
				}
				last = v
				n++
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
			if n != replayRecords {
				b.Fatalf("replayed %d records, want %d", n, replayRecords)
			}
		}
		b.StopTimer()
		if v, ok := last.(*note); !ok || v.N != replayRecords-1 {
			b.Fatalf("last payload = %#v", last)
		}
		b.ReportMetric(float64(b.N)*replayRecords/b.Elapsed().Seconds(), "events/s")
	})
}

// BenchmarkReplayRecords reads and decodes every record's envelope (seq,
// id, type, version, time, account, actor, payload bytes), without
// decoding payloads: what Log.Read hands every reader.
func BenchmarkReplayRecords(b *testing.B) {
	log := openReplayStore(b)
	b.Run(fmt.Sprintf("records=%d", replayRecords), func(b *testing.B) {
		b.ReportAllocs()
		b.ResetTimer()
		var last uint64
		for range b.N {
			err := log.Read(1, 0, func(rec *Record) error {
				last = rec.Seq
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		if last != replayRecords {
			b.Fatalf("last seq %d, want %d", last, replayRecords)
		}
		b.ReportMetric(float64(b.N)*replayRecords/b.Elapsed().Seconds(), "events/s")
	})
}

// BenchmarkReplayRawPebble is the floor under BenchmarkReplay: it iterates
// the same kind of store's log keyspace and only copies each value.
func BenchmarkReplayRawPebble(b *testing.B) {
	log := openReplayStore(b)
	db := log.db.db
	b.Run(fmt.Sprintf("records=%d", replayRecords), func(b *testing.B) {
		buf := make([]byte, 0, 1024)
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			it, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixLog}, UpperBound: []byte{prefixLog + 1}})
			if err != nil {
				b.Fatal(err)
			}
			n := 0
			for valid := it.First(); valid; valid = it.Next() {
				buf = append(buf[:0], it.Value()...)
				n++
			}
			if err := it.Close(); err != nil {
				b.Fatal(err)
			}
			if n != replayRecords || len(buf) == 0 {
				b.Fatalf("iterated %d records, want %d", n, replayRecords)
			}
		}
		b.StopTimer()
		b.ReportMetric(float64(b.N)*replayRecords/b.Elapsed().Seconds(), "events/s")
	})
}

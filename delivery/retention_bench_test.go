package delivery

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"demosvc/eventlog"
)

// BenchmarkAttemptLogUnderRetention sends a steady stream (the same number
// of events every 6 hours of the injected clock) to one webhook whose
// receiver answers with a 1 KiB body, kept in the attempt detail, with
// delivery.retention of one day, and measures the delivery keyspace's
// bytes on disk after each round. It reports the bytes after the first
// retention window (4 rounds), the largest of the second window and of
// the last (6th) window, and two ratios: "ratio", last window's largest
// over the second's (1 when disk use stays flat once retention applies),
// and "ratio-vs-first-window", the end over the first window (above 1 by
// what removed data holds until Pebble compacts it away). The same run
// without retention is the baseline: "no-retention-ratio", the end over
// its first window, grows with the stream.
//
//	go test -run '^$' -bench AttemptLogUnderRetention -benchtime 1x ./delivery
func BenchmarkAttemptLogUnderRetention(b *testing.B) {
	const perRound, rounds, window = 200, 24, 4
	body := strings.Repeat("r", 1024)
	// run returns the bytes after each round.
	run := func(retention time.Duration) []uint64 {
		w := openWorld(b, "")
		srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
			rw.Write([]byte(body))
		}))
		b.Cleanup(srv.Close)
		wh := w.register(srv.URL, "contact.created")
		cfg, clock := clockedConfig()
		cfg.Retention = retention
		w.start(cfg)
		agent := w.newAgent()
		var used []uint64
		for round := 1; round <= rounds; round++ {
			for i := 0; i < perRound; i++ {
				w.startSession(agent, fmt.Sprintf("r%d-%d@example.com", round, i))
			}
			waitFor(b, "the round delivered", func() bool { return succeededSince(b, w, wh.ID, clock.Now()) == perRound })
			n, err := w.store.DiskUsage(eventlog.KeyspaceDelivery)
			if err != nil {
				b.Fatal(err)
			}
			used = append(used, n)
			clock.Advance(6 * time.Hour)
			if retention > 0 {
				// Retention runs on the loop's timer, which the clock
				// moved: wait until nothing older than it is left.
				cutoff := clock.Now().Add(-retention)
				waitAdvancing(b, clock, time.Minute, "retention", func() bool { return oldestCreated(b, w, wh.ID).After(cutoff.Add(-time.Hour)) })
			}
		}
		return used
	}
	largest := func(used []uint64, from, to int) float64 { // rounds from..to, 1-based
		var m uint64
		for _, n := range used[from-1 : to] {
			m = max(m, n)
		}
		return float64(m)
	}
	for range b.N {
		// A minute under a day, so that the round exactly a day old is
		// gone and each measurement holds the same 4 rounds.
		used := run(24*time.Hour - time.Minute)
		kept := run(0)
		first, second, last := float64(used[window-1]), largest(used, window+1, 2*window), largest(used, rounds-window+1, rounds)
		b.Logf("bytes after each round, retention 1 day: %v", used)
		b.Logf("bytes after each round, no retention: %v", kept)
		b.ReportMetric(first, "bytes-after-window")
		b.ReportMetric(second, "bytes-2nd-window")
		b.ReportMetric(last, "bytes-last-window")
		b.ReportMetric(last/second, "ratio")
		b.ReportMetric(float64(used[rounds-1])/first, "ratio-vs-first-window")
		b.ReportMetric(float64(kept[rounds-1])/float64(kept[window-1]), "no-retention-ratio")
		b.ReportMetric(0, "ns/op")
	}
}

// succeededSince counts the succeeded deliveries of wh created at or
// after t.
func succeededSince(b *testing.B, w *world, wh string, t time.Time) int {
	n := 0
	err := w.m.store.db.Scan(deliveryPrefix(wh), func(_, v []byte) error {
		d, err := decodeDelivery(v)
		if err == nil && d.Status == StatusSucceeded && d.CreatedAt >= t.Unix() {
			n++
		}
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	return n
}

// oldestCreated is when the oldest delivery of wh was created; far in the
// future when there is none.
func oldestCreated(b *testing.B, w *world, wh string) time.Time {
	oldest := time.Unix(1<<40, 0)
	err := w.m.store.db.Scan(deliveryPrefix(wh), func(_, v []byte) error {
		d, err := decodeDelivery(v)
		if err == nil {
			oldest = time.Unix(d.CreatedAt, 0)
		}
		return errStop
	})
	if err != nil && err != errStop {
		b.Fatal(err)
	}
	return oldest
}

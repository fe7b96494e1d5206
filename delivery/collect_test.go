package delivery

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"demosvc/projections"
)

// A loop's step stores at most maxCollectBytes of bodies, plus the one
// that crosses the bound: on a cluster node a step's write is one message
// of the replicated log, which NATS bounds. The next step starts where
// the last stopped: no event is skipped or taken twice.
func TestCollectBoundsAStepsBodies(t *testing.T) {
	w := openWorld(t, "")
	wh := w.register("https://hooks.example.com/x", "demo.completed")
	agent := w.newAgent()
	first := w.startSession(agent, "pat@example.com")
	// 400 sessions started, then 400 completed with long replay URLs: a
	// step of maxCollect records then reads about 1.2 MB of bodies.
	const n = 400
	ids := []string{first.ID}
	for range n - 1 {
		v, err := w.state.StartSession(t.Context(), w.pr, projections.SessionInput{AgentID: agent, ContactID: &first.ContactID}, nil)
		if err != nil {
			t.Fatal(err)
		}
		var s startedSession
		if err := json.Unmarshal(v.(json.RawMessage), &s); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, s.ID)
	}
	replay := "https://replay.example.com/" + strings.Repeat("r", 2000)
	for _, id := range ids {
		if _, err := w.state.CompleteSession(t.Context(), w.pr, id, projections.Figures{IntentScore: ptr(50),
			Signals: &projections.Signals{Interest: 50, Objections: 10, BuyingSignals: 40}, DurationSeconds: ptr(600),
			ReplayURL: ptr(replay)}, nil); err != nil {
			t.Fatal(err)
		}
	}

	dp := New(w.log, w.state, testConfig(), nil)
	targets, _ := w.state.WebhookTargets()
	var l *loop
	for _, tg := range targets {
		if tg.ID == wh.ID {
			l = newLoop(dp, tg)
		}
	}
	if l == nil {
		t.Fatalf("no target for webhook %s", wh.ID)
	}
	cursor, err := l.loadState()
	if err != nil {
		t.Fatal(err)
	}
	head := w.log.DurableSeq()
	seen := map[uint64]bool{}
	largest := 0
	// step runs one step of the loop and returns the deliveries it stored.
	step := func() []*Delivery {
		t.Helper()
		next, _, err := l.collect(cursor, head)
		if err != nil {
			t.Fatal(err)
		}
		if next <= cursor {
			t.Fatalf("a step from %d went to %d", cursor, next)
		}
		defer func() { cursor = next }()
		if len(l.writes) == 0 {
			return nil // nothing to send in these records
		}
		wr := <-l.writes
		l.inflight--
		if err := wr.wait(); err != nil {
			t.Fatal(err)
		}
		if stored, ok, err := l.dp.store.cursor(wh.ID); err != nil || !ok || stored != next {
			t.Errorf("stored cursor %d (%v, %v), want %d", stored, ok, err, next)
		}
		clear(l.pending)
		return wr.fresh
	}
	for steps := 0; cursor < head; steps++ {
		if steps > 2*int(head) {
			t.Fatalf("no progress past %d of %d", cursor, head)
		}
		from := cursor
		fresh := step()
		size, body := 0, 0
		for _, d := range fresh {
			if d.Seq <= from || d.Seq > cursor || seen[d.Seq] {
				t.Errorf("a step from %d to %d stored seq %d (seen before: %v)", from, cursor, d.Seq, seen[d.Seq])
			}
			seen[d.Seq] = true
			size += len(d.Body)
			body = max(body, len(d.Body))
		}
		if size > maxCollectBytes+body {
			t.Errorf("a step from %d to %d stored %d bytes of bodies (bound %d)", from, cursor, size, maxCollectBytes)
		}
		largest = max(largest, size)
	}
	if len(seen) != n {
		t.Errorf("%d of %d demo.completed events stored as deliveries", len(seen), n)
	}
	t.Logf("largest step: %d bytes of bodies", largest)

	// Two replays of 300 events each, then a new event: each request is
	// a step of its own, whatever its bodies weigh, and so is the event.
	var seqs []uint64
	for seq := range seen {
		seqs = append(seqs, seq)
	}
	for _, part := range [][]uint64{seqs[:300], seqs[100:]} {
		if _, err := w.state.RequestRedelivery(t.Context(), w.pr, wh.ID, projections.RedeliverReplay, nil, part,
			projections.RedeliveryAnswer{Queued: len(part)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	last := w.startSession(agent, "pat@example.com")
	if _, err := w.state.CompleteSession(t.Context(), w.pr, last.ID, projections.Figures{IntentScore: ptr(50),
		Signals: &projections.Signals{Interest: 50, Objections: 10, BuyingSignals: 40}, DurationSeconds: ptr(600),
		ReplayURL: ptr(replay)}, nil); err != nil {
		t.Fatal(err)
	}
	head = w.log.DurableSeq()
	var sizes []int
	for cursor < head {
		if fresh := step(); len(fresh) > 0 {
			sizes = append(sizes, len(fresh))
		}
	}
	if want := []int{300, 300, 1}; !slices.Equal(sizes, want) {
		t.Errorf("steps stored %v deliveries, want %v", sizes, want)
	}
}

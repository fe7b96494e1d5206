package projections

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"demosvc/eventlog"
)

// jumpClock is a clock the test moves by hand.
type jumpClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *jumpClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *jumpClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// idemHeld counts the recorded answers in memory (read on the writer,
// which owns them) and under the idempotency keyspace of the store.
func (e *env) idemHeld() (inMemory, onDisk int) {
	e.t.Helper()
	_, err := e.p.Do(context.Background(), Command{Decide: func(*State) ([]any, []eventlog.Put, error) {
		inMemory = e.p.idem.Len()
		return nil, nil, nil
	}})
	if err != nil {
		e.t.Fatal(err)
	}
	err = e.store.Scan([]byte{eventlog.KeyspaceIdempotency}, func(k, v []byte) error { onDisk++; return nil })
	if err != nil {
		e.t.Fatal(err)
	}
	return inMemory, onDisk
}

func (e *env) idemAgent(pr Principal, clock *jumpClock, key, fingerprint string) (Replay, error) {
	v, err := e.p.CreateAgent(context.Background(), pr, AgentInput{Name: key, SandboxURL: "https://s.example.com"}, &Idempotency{
		Key: key, Fingerprint: fingerprint, Now: clock.now(),
		Record: func(value any, err error) []byte { return []byte(fmt.Sprint(value, err)) },
	})
	if err != nil {
		return Replay{}, err
	}
	return v.(Replay), nil
}

// TestIdempotencyRecordsExpire sends a stream of unique keys for three
// windows with the clock advancing an hour per batch: the records held in
// memory and on disk never exceed what one window (and one batch of
// sweeping lag) allows, a key is reusable after its window, and a restart
// after a quiet window starts with nothing and leaves nothing on disk.
func TestIdempotencyRecordsExpire(t *testing.T) {
	clock := &jumpClock{t: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)}
	dir := t.TempDir()
	e := openEnvClock(t, dir, DefaultOptions, clock.now)
	pr := e.account("acme")

	const perHour = 20
	const hours = 3 * 24
	bound := (int(IdempotencyWindow/time.Hour) + 1) * perHour
	first, err := e.idemAgent(pr, clock, "k-first", "A")
	if err != nil {
		t.Fatal(err)
	}
	if again, err := e.idemAgent(pr, clock, "k-first", "A"); err != nil || string(again.Response) != string(first.Response) {
		t.Fatalf("retry inside the window: %q, %v; want the first answer replayed", again.Response, err)
	}
	maxMem, maxDisk := 0, 0
	for h := 0; h < hours; h++ {
		clock.add(time.Hour)
		for i := 0; i < perHour; i++ {
			if _, err := e.idemAgent(pr, clock, fmt.Sprintf("k-%d-%d", h, i), "A"); err != nil {
				t.Fatal(err)
			}
		}
		mem, disk := e.idemHeld()
		maxMem, maxDisk = max(maxMem, mem), max(maxDisk, disk)
		if mem > bound || disk > bound {
			t.Fatalf("hour %d: %d records in memory, %d on disk; one window holds at most %d", h, mem, disk, bound)
		}
	}
	t.Logf("%d unique keys over %d h: at most %d records in memory and %d on disk (bound %d)",
		hours*perHour+1, hours, maxMem, maxDisk, bound)

	// The first key expired long ago: another request may use it.
	if r, err := e.idemAgent(pr, clock, "k-first", "B"); err != nil || string(r.Response) == string(first.Response) {
		t.Fatalf("reusing an expired key: %q, %v; want a new answer", r.Response, err)
	}

	// A quiet window, then a restart: nothing to load, nothing left.
	e.close()
	clock.add(IdempotencyWindow + time.Minute)
	e = openEnvClock(t, dir, DefaultOptions, clock.now)
	if mem, disk := e.idemHeld(); mem != 0 || disk != 0 {
		t.Fatalf("after a restart past the window: %d records in memory, %d on disk; want none", mem, disk)
	}
}

// TestIdempotencyRecordsOfTheOldLayoutAreKept stores a record as the layout
// before the time-ordered one did: start-up moves it, and it still replays.
func TestIdempotencyRecordsOfTheOldLayoutAreKept(t *testing.T) {
	clock := &jumpClock{t: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)}
	dir := t.TempDir()
	e := openEnvClock(t, dir, DefaultOptions, clock.now)
	pr := e.account("acme")
	old, err := msgpack.Marshal(&struct {
		Fingerprint string `msgpack:"f"`
		Response    []byte `msgpack:"r"`
		Created     int64  `msgpack:"c"`
	}{"A", []byte("the first answer"), clock.now().Unix()})
	if err != nil {
		t.Fatal(err)
	}
	legacy := append([]byte{eventlog.KeyspaceIdempotency}, pr.Account.ID+"\x00k-old"...)
	if err := e.store.WriteSync([]eventlog.Put{{Key: legacy, Value: old}}, nil, nil); err != nil {
		t.Fatal(err)
	}
	e.close()
	clock.add(time.Hour)
	e = openEnvClock(t, dir, DefaultOptions, clock.now)
	r, err := e.idemAgent(pr, clock, "k-old", "A")
	if err != nil || string(r.Response) != "the first answer" {
		t.Fatalf("retry of a record of the old layout: %q, %v", r.Response, err)
	}
	if _, ok, _ := e.store.Get(legacy); ok {
		t.Error("the record of the old layout is still under its old key")
	}
	if mem, disk := e.idemHeld(); mem != 1 || disk != 1 {
		t.Errorf("%d records in memory, %d on disk; want 1 and 1", mem, disk)
	}
}

package projections

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
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

// TestRecordedAnswersLeaveTheHeapOnceDurable: a recorded answer is held in
// memory only until its commit is durable, and a replay after that reads
// the store's copy, byte for byte the first answer: inside the group that
// recorded it, after it, and after a restart. A record the store has lost
// is an error, never a second run of the command.
func TestRecordedAnswersLeaveTheHeapOnceDurable(t *testing.T) {
	clock := &jumpClock{t: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)}
	dir := t.TempDir()
	e := openEnvClock(t, dir, DefaultOptions, clock.now)
	pr := e.account("acme")
	var runs atomic.Int32
	// An idempotent command whose answer tells its runs apart.
	command := func() (Replay, error) {
		v, err := e.p.Do(context.Background(), Command{Account: pr.Account.ID,
			Idem: &Idempotency{Key: "k-1", Fingerprint: "A", Now: clock.now(),
				Record: func(value any, err error) []byte { return []byte(fmt.Sprint(value)) }},
			Decide: func(*State) ([]any, []eventlog.Put, error) { runs.Add(1); return nil, nil, nil },
			Result: func(*State) any { return fmt.Sprintf("run %d", runs.Load()) }})
		if err != nil {
			return Replay{}, err
		}
		return v.(Replay), nil
	}
	heldInMemory := func() (n int) {
		_, err := e.p.Do(context.Background(), Command{Decide: func(*State) ([]any, []eventlog.Put, error) {
			for _, r := range e.p.idem.byKey {
				if r.Response != nil {
					n++
				}
			}
			return nil, nil, nil
		}})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	// Two requests with one key in one group: the writer is held in a
	// command while both queue behind it.
	entered, release := make(chan struct{}), make(chan struct{})
	blocked := make(chan error, 1)
	go func() {
		_, err := e.p.Do(context.Background(), Command{Decide: func(*State) ([]any, []eventlog.Put, error) {
			close(entered)
			<-release
			return nil, nil, nil
		}})
		blocked <- err
	}()
	<-entered
	type answer struct {
		r   Replay
		err error
	}
	answers := make(chan answer, 2)
	for range 2 {
		go func() {
			r, err := command()
			answers <- answer{r, err}
		}()
	}
	for deadline := time.Now().Add(10 * time.Second); len(e.p.queue) < 2 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	queued := len(e.p.queue)
	close(release)
	if err := <-blocked; err != nil {
		t.Fatal(err)
	}
	first, second := <-answers, <-answers
	if queued != 2 {
		t.Fatalf("%d of the two requests queued behind the held writer", queued)
	}
	if first.err != nil || second.err != nil || string(first.r.Response) != "run 1" || string(second.r.Response) != "run 1" {
		t.Fatalf("one key twice in one group: %q (%v) and %q (%v); want run 1 twice", first.r.Response, first.err, second.r.Response, second.err)
	}
	if n := heldInMemory(); n != 0 {
		t.Fatalf("%d recorded answers still in memory once durable", n)
	}
	if again, err := command(); err != nil || string(again.Response) != "run 1" {
		t.Fatalf("replay from the store: %q, %v; want run 1", again.Response, err)
	}
	e.close()
	e = openEnvClock(t, dir, DefaultOptions, clock.now)
	if n := heldInMemory(); n != 0 {
		t.Fatalf("%d recorded answers in memory after a restart", n)
	}
	if again, err := command(); err != nil || string(again.Response) != "run 1" {
		t.Fatalf("replay after a restart: %q, %v; want run 1", again.Response, err)
	}

	// The store loses the record (damage): the retry is refused, and the
	// command does not run again.
	if err := e.store.WriteSync(nil, idemTimePrefix, []byte{eventlog.KeyspaceIdempotency, 2}); err != nil {
		t.Fatal(err)
	}
	if r, err := command(); err == nil || !strings.Contains(err.Error(), "missing from the store") || runs.Load() != 1 {
		t.Fatalf("replay of a lost record: %q, %v, %d runs; want an error and one run", r.Response, err, runs.Load())
	}
}

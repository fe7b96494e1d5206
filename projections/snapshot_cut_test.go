package projections

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"demosvc/eventlog"
)

// owned is an id and the principal it belongs to.
type owned struct {
	pr Principal
	id string
}

// opGen runs random commands of every kind that changes the state. It is
// safe for concurrent use.
type opGen struct {
	t                                          testing.TB
	e                                          *env
	mu                                         sync.Mutex // guards everything below
	rng                                        *rand.Rand
	prs                                        []Principal
	agents, sessions, contacts, webhooks, keys []owned
	i                                          int
	onSnapshot                                 func() // op 16, if set
	users                                      *userSteps
}

func newOpGen(t testing.TB, e *env, seed uint64) *opGen {
	g := &opGen{t: t, e: e, rng: rand.New(rand.NewPCG(seed, seed)), users: newUserSteps(e)}
	for i := 0; i < 2; i++ {
		g.prs = append(g.prs, e.account(fmt.Sprintf("acc%d", i)))
	}
	return g
}

func (g *opGen) pick(list []owned, pr Principal) string {
	if len(list) == 0 {
		return "agt_01m7yzmhg082f2rsf1z8xs2hpp"
	}
	o := list[g.rng.IntN(len(list))]
	if g.rng.IntN(20) == 0 {
		return o.id // sometimes another account's: refused
	}
	for range 4 {
		if o.pr.Account.ID == pr.Account.ID {
			break
		}
		o = list[g.rng.IntN(len(list))]
	}
	return o.id
}

// step runs one random command; a refusal is fine, anything else fails
// the test.
func (g *opGen) step() {
	ctx := context.Background()
	g.mu.Lock()
	i := g.i
	g.i++
	pr := g.prs[g.rng.IntN(len(g.prs))]
	score := g.rng.IntN(101)
	sig := &Signals{g.rng.IntN(101), g.rng.IntN(101), g.rng.IntN(101)}
	op := g.rng.IntN(17)
	if len(g.agents) == 0 {
		op = 0
	}
	var run func() error
	add := func(list *[]owned, id string) {
		g.mu.Lock()
		defer g.mu.Unlock()
		*list = append(*list, owned{pr, id})
	}
	switch op {
	case 0:
		run = func() error {
			v, err := g.e.p.CreateAgent(ctx, pr, AgentInput{Name: fmt.Sprint("a", i), SandboxURL: "https://s.example.com"}, nil)
			if err == nil {
				add(&g.agents, v.(AgentView).ID)
			}
			return err
		}
	case 1:
		id, st, name := g.pick(g.agents, pr), []string{AgentActive, AgentInactive}[g.rng.IntN(2)], fmt.Sprint("renamed", i)
		run = func() error {
			_, err := g.e.p.UpdateAgent(ctx, pr, id, AgentPatch{Status: &st, Name: &name})
			return err
		}
	case 2, 3, 4:
		in := SessionInput{AgentID: g.pick(g.agents, pr)}
		if len(g.contacts) > 0 && g.rng.IntN(3) == 0 {
			c := g.pick(g.contacts, pr)
			in.ContactID = &c
		} else {
			in.Contact = &Contact{Name: "N", Email: fmt.Sprintf("p%d@Example.com", g.rng.IntN(30))}
		}
		run = func() error {
			v, err := g.e.p.StartSession(ctx, pr, in, nil)
			if err == nil {
				f := fields(g.t, v)
				add(&g.sessions, f.ID)
				add(&g.contacts, f.ContactID)
			}
			return err
		}
	case 5, 6:
		id := g.pick(g.sessions, pr)
		run = func() error {
			_, err := g.e.p.ProgressSession(ctx, pr, id, Figures{IntentScore: &score, Signals: sig}, nil)
			return err
		}
	case 7:
		id, d, url := g.pick(g.sessions, pr), g.rng.IntN(3600), "https://replay.example.com/x"
		run = func() error {
			_, err := g.e.p.CompleteSession(ctx, pr, id, Figures{IntentScore: &score, Signals: sig, DurationSeconds: &d, ReplayURL: &url}, nil)
			return err
		}
	case 8:
		id := g.pick(g.sessions, pr)
		run = func() error {
			_, err := g.e.p.AbandonSession(ctx, pr, id, Figures{IntentScore: &score}, nil)
			return err
		}
	case 9:
		id := g.pick(g.sessions, pr)
		run = func() error {
			_, err := g.e.p.BookMeeting(ctx, pr, id, MeetingInput{ScheduledAt: "2026-12-01T10:00:00Z", CalendarLink: "https://cal.example.com"}, nil)
			return err
		}
	case 10:
		run = func() error {
			v, err := g.e.p.RegisterWebhook(ctx, pr, WebhookInput{URL: fmt.Sprint("https://hooks.example.com/", i), Events: []string{"lead.hot", "demo.completed"}}, nil)
			if err == nil {
				add(&g.webhooks, v.(WebhookView).ID)
			}
			return err
		}
	case 11:
		id := g.pick(g.webhooks, pr)
		run = func() error { return g.e.p.DeleteWebhook(ctx, pr, id) }
	case 12:
		// The webhook operations of issue 12, one picked at random.
		id, sub, rate := g.pick(g.webhooks, pr), g.rng.IntN(6), g.rng.IntN(5)
		st := []string{"enabled", "disabled"}[g.rng.IntN(2)]
		run = func() error {
			var err error
			switch sub {
			case 0:
				err = g.e.p.DisableWebhook(ctx, id, DisabledGone, "410 Gone")
			case 1:
				_, err = g.e.p.UpdateWebhook(ctx, pr, id, WebhookPatch{Status: &st, SkipBacklog: st == "enabled" && rate%2 == 0})
			case 2:
				_, err = g.e.p.UpdateWebhook(ctx, pr, id, WebhookPatch{RateLimitPerSecond: &rate,
					Events: [][]string{{"lead.hot"}, {"demo.completed", "lead.hot"}, {"contact.created"}}[rate%3]})
			case 3:
				_, err = g.e.p.RotateWebhookSecret(ctx, pr, id, rate*600, nil)
			case 4:
				_, err = g.e.p.TestWebhook(ctx, pr, id, "t", "dlv_01m80s8vkm2e8k3np7nbv61qm2", nil, func(*eventlog.Record) any { return nil })
			case 5:
				_, err = g.e.p.RequestRedelivery(ctx, pr, id, RedeliverReplay, nil, []uint64{1}, RedeliveryAnswer{Queued: 1}, nil)
			}
			return err
		}
	case 13:
		run = func() error {
			k, err := g.e.p.CreateKey(ctx, "cli", pr.Account.ID)
			if err == nil {
				add(&g.keys, k.ID)
			}
			return err
		}
	case 14:
		id := g.pick(g.keys, pr)
		run = func() error {
			_, err := g.e.p.RevokeKey(ctx, "cli", id)
			return err
		}
	case 15:
		run = func() error {
			g.mu.Lock()
			defer g.mu.Unlock()
			return g.users.step(g.rng, pr)
		}
	default:
		run = func() error {
			if g.onSnapshot != nil {
				g.onSnapshot()
			}
			return nil
		}
	}
	g.mu.Unlock()
	var pe *Error
	if err := run(); err != nil && !errors.As(err, &pe) {
		g.t.Errorf("op %d (%d): %v", i, op, err)
	}
}

// replayTo rebuilds the state of the log's first seq events.
func replayTo(t testing.TB, log *eventlog.Log, seq uint64) *State {
	t.Helper()
	s := NewState()
	reg := log.Registry()
	err := log.Read(1, seq, func(rec *eventlog.Record) error {
		payload, err := reg.Decode(rec)
		if err != nil {
			return err
		}
		return s.apply(rec, payload)
	})
	if err != nil || s.seq != seq {
		t.Fatalf("replaying to %d: at %d, %v", seq, s.seq, err)
	}
	return s
}

// checkSnapshotAndTail fails unless the stored snapshot is at seq and
// holds the state of the log's first seq events (checkStoredSnapshot), and
// it with the log's tail replayed is the live state.
func (e *env) checkSnapshotAndTail(seq uint64) {
	e.t.Helper()
	e.checkStoredSnapshot(seq)
	snap, _ := loadSnapshot(e.store)
	tail, err := ReplayLog(e.log, snap)
	if err != nil {
		e.t.Fatal(err)
	}
	if got, live := dump(tail), e.liveDump(); got != live {
		e.t.Errorf("snapshot + tail differs from the live state:\n%s", firstDiff(got, live))
	}
}

// checkStoredSnapshot fails unless the stored snapshot is at seq and holds
// exactly the state of the log's first seq events.
func (e *env) checkStoredSnapshot(seq uint64) {
	e.t.Helper()
	snap, why := loadSnapshot(e.store)
	if snap == nil {
		e.t.Fatalf("no snapshot: %s", why)
	}
	if snap.seq != seq {
		e.t.Fatalf("snapshot at %d, want %d", snap.seq, seq)
	}
	if got, want := dump(snap), dump(replayTo(e.t, e.log, seq)); got != want {
		e.t.Fatalf("snapshot at %d differs from the log's state at its seq:\n%s", seq, firstDiff(got, want))
	}
}

// TestSnapshotIsTheStateAtItsCut changes the state in every way apply can
// between the steps of a snapshot's encoding, mostly objects that existed
// when it began: the snapshot holds the state at its cut, and the snapshot
// plus the log's tail is the live state.
func TestSnapshotIsTheStateAtItsCut(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			e := openEnv(t, "", DefaultOptions)
			g := newOpGen(t, e, seed)
			for range 400 {
				g.step()
			}
			steps := 0
			seq, err := e.p.saveSnapshot(3, func() {
				steps++
				for range 10 {
					g.step()
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			if steps < 20 {
				t.Fatalf("only %d steps: the state is too small to test anything", steps)
			}
			// Every kind of change must have happened during the snapshot,
			// or this test proves less than it says.
			seen := map[string]bool{}
			e.log.Read(seq+1, 0, func(rec *eventlog.Record) error { seen[rec.Type] = true; return nil })
			for _, want := range []any{&AgentUpdated{}, &SessionProgressed{}, &LeadHot{}, &SessionCompleted{}, &SessionAbandoned{},
				&MeetingBooked{}, &APIKeyRevoked{}, &WebhookDisabled{}, &WebhookDeleted{}, &AgentCreated{}, &SessionStarted{}} {
				if typ, _, _ := e.log.Registry().Schema(want); !seen[typ] {
					t.Errorf("no %s during the snapshot", typ)
				}
			}
			e.checkSnapshotAndTail(seq)
		})
	}
}

// TestSnapshotsWhileCommandsRun takes snapshots in small steps while two
// goroutines send random commands: each snapshot is the state at its seq,
// and the last one plus the tail is the live state.
func TestSnapshotsWhileCommandsRun(t *testing.T) {
	e := openEnv(t, "", DefaultOptions)
	g := newOpGen(t, e, 7)
	for range 200 {
		g.step()
	}
	var wg sync.WaitGroup
	done := make(chan struct{})
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 300 {
				g.step()
			}
		}()
	}
	go func() { wg.Wait(); close(done) }()
	snapshots := 0
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		seq, err := e.p.saveSnapshot(3, nil)
		if err != nil {
			t.Fatal(err)
		}
		e.checkStoredSnapshot(seq)
		snapshots++
	}
	g.step() // at least one event after the last snapshot
	snap, _ := loadSnapshot(e.store)
	tail, err := ReplayLog(e.log, snap)
	if err != nil {
		t.Fatal(err)
	}
	if got, live := dump(tail), e.liveDump(); got != live {
		t.Errorf("snapshot + tail differs from the live state:\n%s", firstDiff(got, live))
	}
	t.Logf("%d snapshots while %d events were written", snapshots, e.log.DurableSeq())
}

// TestSnapshotEncodingAllocatesPerSnapshotNotPerObject counts the
// allocations of one encoding: its buffer, the cut's lists and maps, never
// one per object. Pre-images kept by value made the encoder's loop
// variable escape, an allocation for each session of every snapshot.
func TestSnapshotEncodingAllocatesPerSnapshotNotPerObject(t *testing.T) {
	e := openEnv(t, "", DefaultOptions)
	pr := e.account("acme")
	agent := e.agent(pr, "a")
	const sessions = 400
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range sessions / 8 {
				e.session(pr, agent.ID, fmt.Sprintf("p%d.%d@example.com", w, i))
			}
		}()
	}
	wg.Wait()
	e.p.snapMu.Lock()
	defer e.p.snapMu.Unlock()
	allocs := testing.AllocsPerRun(5, func() {
		w := newSnapWriter(func([]byte) error { return nil })
		if _, err := e.p.encodeInSteps(w, 0, nil); err != nil {
			t.Fatal(err)
		}
		w.emit(true)
	})
	if allocs > sessions/10 {
		t.Errorf("encoding %d sessions allocates %.0f times, want a few per snapshot", sessions, allocs)
	}
	t.Logf("%.0f allocations to encode %d sessions", allocs, sessions)
}

// TestSnapshotIsWrittenAsItIsEncoded: a snapshot of several chunks goes
// to its sink chunk by chunk through one buffer that never grows, every
// chunk but the last snapshotChunk long (what the loader expects), and
// the chunks are exactly what encoding the state at once writes. Stored
// by SaveSnapshot, it loads as the state. Encoding all of a snapshot into
// one buffer first allocated its whole size at every snapshot.
func TestSnapshotIsWrittenAsItIsEncoded(t *testing.T) {
	e := openEnv(t, "", DefaultOptions)
	pr := e.account("acme")
	var wg sync.WaitGroup
	for i := range 600 {
		wg.Add(1)
		go func() { // about 3.5 MB of personas: four chunks
			defer wg.Done()
			persona := strings.Repeat(fmt.Sprintf("persona %d. ", i), 600)[:6<<10]
			if _, err := e.p.CreateAgent(context.Background(), pr, AgentInput{Name: fmt.Sprint("a", i),
				SandboxURL: "https://sandbox.example.com/", Persona: &persona}, nil); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	var whole []byte
	e.p.View(func(s *State) {
		var err error
		if whole, err = s.encodeSnapshot(); err != nil {
			t.Fatal(err)
		}
	})

	var chunks [][]byte
	w := newSnapWriter(func(chunk []byte) error {
		chunks = append(chunks, bytes.Clone(chunk))
		return nil
	})
	capacity := cap(w.buf)
	e.p.snapMu.Lock()
	_, err := e.p.encodeInSteps(w, snapshotStep, nil)
	e.p.snapMu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	w.emit(true)
	if w.err != nil {
		t.Fatal(w.err)
	}
	if len(chunks) < 3 {
		t.Fatalf("%d chunks for %d bytes, want several", len(chunks), len(whole))
	}
	for i, c := range chunks[:len(chunks)-1] {
		if len(c) != snapshotChunk {
			t.Errorf("chunk %d of %d is %d bytes, want %d", i, len(chunks), len(c), snapshotChunk)
		}
	}
	if got := bytes.Join(chunks, nil); !bytes.Equal(got, whole) {
		t.Errorf("the chunks (%d bytes) are not the snapshot encoded at once (%d bytes)", len(got), len(whole))
	}
	if cap(w.buf) != capacity || w.size != int64(len(whole)) || w.chunks != len(chunks) {
		t.Errorf("buffer %d bytes, was %d; size %d, chunks %d: want the buffer never grown, size %d, chunks %d",
			cap(w.buf), capacity, w.size, w.chunks, len(whole), len(chunks))
	}

	// Once the sink has failed, the encoder stops at its next step
	// instead of walking the rest of the state.
	// It says why, and the cut is uninstalled either way.
	steps := func(sink func([]byte) error) (n int, err error) {
		w := newSnapWriter(sink)
		e.p.snapMu.Lock()
		defer e.p.snapMu.Unlock()
		_, err = e.p.encodeInSteps(w, 16, func() { n++ })
		e.p.View(func(s *State) {
			if s.cut != nil {
				t.Error("the cut is still installed after the encoder returned")
			}
		})
		return n, err
	}
	all, err := steps(func([]byte) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	diskFull := errors.New("disk full")
	failed, err := steps(func([]byte) error { return diskFull })
	if !errors.Is(err, diskFull) {
		t.Errorf("a failed sink: the encoder returned %v, want %v", err, diskFull)
	}
	if most := all*snapshotChunk/len(whole) + 2; failed > most {
		t.Errorf("after the first chunk failed the encoder took %d steps of %d, want at most %d", failed, all, most)
	}

	seq, err := e.p.SaveSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	e.checkStoredSnapshot(seq)
	if got := e.p.snapSize.Load(); got != int64(len(whole)) {
		t.Errorf("snapSize %d, want %d", got, len(whole))
	}
}

// TestEmitHandsAtLeastOneChunk: a snapshot is at least one chunk, even of
// nothing, and a final emit of an exact multiple of chunks adds none; once
// the sink has failed, nothing more is kept.
func TestEmitHandsAtLeastOneChunk(t *testing.T) {
	for _, c := range []struct{ size, chunks int }{{0, 1}, {1, 1}, {snapshotChunk, 1}, {2 * snapshotChunk, 2}, {2*snapshotChunk + 1, 3}} {
		var got []int
		w := newSnapWriter(func(chunk []byte) error { got = append(got, len(chunk)); return nil })
		w.buf = append(w.buf, make([]byte, c.size)...)
		w.emit(false)
		w.emit(true)
		if len(got) != c.chunks || w.size != int64(c.size) {
			t.Errorf("%d bytes: chunks %v (size %d), want %d chunks", c.size, got, w.size, c.chunks)
		}
	}
	// After the sink fails, what the encoder writes is dropped.
	w := newSnapWriter(func([]byte) error { return errors.New("disk full") })
	for range 3 {
		w.buf = append(w.buf, make([]byte, snapshotChunk)...)
		w.emit(false)
	}
	if w.err == nil || len(w.buf) != 0 || w.chunks != 1 {
		t.Errorf("after a failed chunk: err %v, %d bytes kept, %d chunks tried; want the error, none kept, one tried", w.err, len(w.buf), w.chunks)
	}
}

// A snapshot naming one session or contact id twice does not load: the
// tables would keep the first value, unreachable by its id.
func TestASnapshotWithAnIDTwiceDoesNotLoad(t *testing.T) {
	e := openEnv(t, "", DefaultOptions)
	pr := e.account("acme")
	agent := e.agent(pr, "a")
	first, second := e.session(pr, agent.ID, "one@example.com"), e.session(pr, agent.ID, "two@example.com")
	var data []byte
	e.p.View(func(s *State) {
		var err error
		if data, err = s.encodeSnapshot(); err != nil {
			t.Fatal(err)
		}
	})
	if _, err := decodeSnapshot(data); err != nil {
		t.Fatalf("the snapshot as encoded does not load: %v", err)
	}
	for _, ids := range [][3]string{{PrefixSession, first.ID, second.ID}, {PrefixContact, first.ContactID, second.ContactID}} {
		a, okA := ParseID(ids[0], ids[1])
		b, okB := ParseID(ids[0], ids[2])
		if !okA || !okB {
			t.Fatalf("ids %v do not parse", ids)
		}
		if !bytes.Contains(data, b[:]) {
			t.Fatalf("%s is not in the snapshot", ids[2])
		}
		twice := bytes.ReplaceAll(data, b[:], a[:])
		if _, err := decodeSnapshot(twice); err == nil || !strings.Contains(err.Error(), "twice") {
			t.Errorf("%s given twice: %v, want an error saying so", ids[1], err)
		}
	}
}

// The lists of a tenant's contacts and sessions, an agent's sessions and
// a contact's sessions grow past their first chunks while a snapshot's
// encoder walks them between steps: the snapshot is the state at its cut.
func TestASnapshotCutHoldsListsThatGrowPastAChunk(t *testing.T) {
	e := openEnv(t, "", DefaultOptions)
	pr := e.account("acc0")
	ctx := context.Background()
	v, err := e.p.CreateAgent(ctx, pr, AgentInput{Name: "a", SandboxURL: "https://s.example.com"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	agentID := v.(AgentView).ID
	n := 0
	start := func() {
		n++
		c := &Contact{Name: "Pat", Email: "pat@example.com"} // every other session, the same contact
		if n%2 == 0 {
			c = &Contact{Name: "New", Email: fmt.Sprintf("new%d@example.com", n)}
		}
		if _, err := e.p.StartSession(ctx, pr, SessionInput{AgentID: agentID, Contact: c}, nil); err != nil {
			t.Fatal(err)
		}
	}
	for range listChunk - 23 {
		start()
	}
	seq, err := e.p.saveSnapshot(30, func() {
		for range 30 {
			start()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	tn := e.p.state.tenants[pr.Account.ID]
	pat := e.p.state.sessionsOfContact(e.p.state.contacts.num(tn.contacts.at(0)))
	if tn.sessions.len() < 2*listChunk+1 || tn.contacts.len() < listChunk+1 || pat.len() < listChunk+1 {
		t.Fatalf("the lists did not grow past a chunk during the snapshot: %d sessions, %d contacts, %d of one contact",
			tn.sessions.len(), tn.contacts.len(), pat.len())
	}
	e.checkSnapshotAndTail(seq)
}

// TestCheckSnapshotFindsASnapshotTheLogDoesNotGive: a stored snapshot
// that is the log's state at its seq passes; one altered and stored with
// a checksum that matches it (an account renamed) is found, naming its
// seq, though it would load.
func TestCheckSnapshotFindsASnapshotTheLogDoesNotGive(t *testing.T) {
	e := openEnv(t, "", DefaultOptions)
	if c, err := CheckSnapshot(e.log, nil); c != (SnapshotCheck{}) || err != nil {
		t.Fatalf("with no snapshot: %+v, %v; want nothing", c, err)
	}
	g := newOpGen(t, e, 5)
	for range 300 {
		g.step()
	}
	seq, err := e.p.SaveSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	if got, err := CheckSnapshot(e.log, nil); got.Seq != seq || got.Ignored != "" || err != nil {
		t.Fatalf("the snapshot as saved: %+v, %v; want seq %d, nil", got, err, seq)
	}
	// A forged one: the live state altered, then saved with a checksum
	// of its own.
	e.p.View(func(s *State) {
		for _, a := range s.accounts {
			a.Name = "Mallory Corp"
			break
		}
	})
	if _, err := e.p.SaveSnapshot(); err != nil {
		t.Fatal(err)
	}
	if snap, why := loadSnapshot(e.store); snap == nil {
		t.Fatalf("the forged snapshot does not load (%s): the test would prove nothing", why)
	}
	var sm *SnapshotMismatchError
	if got, err := CheckSnapshot(e.log, nil); !errors.As(err, &sm) || sm.Seq != seq || got.Seq != seq {
		t.Fatalf("the forged snapshot: %+v, %v; want a SnapshotMismatchError at seq %d", got, err, seq)
	}
}

// A snapshot saved while the running state checks the stored one (serve's
// own, beside log verify) does not make the stored one look damaged or
// missing: it is read while none is being saved. Read beside a save, the
// metadata came without its chunks, or neither was found, a few times in a
// hundred checks, and verify said the snapshot was ignored, unchecked.
func TestCheckSnapshotBesideSnapshotsBeingSaved(t *testing.T) {
	e := openEnv(t, "", DefaultOptions)
	g := newOpGen(t, e, 5)
	for range 200 {
		g.step()
	}
	if _, err := e.p.SaveSnapshot(); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	saved := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				saved <- nil
				return
			default:
			}
			if _, err := e.p.SaveSnapshot(); err != nil {
				saved <- err
				return
			}
		}
	}()
	for i := range 100 {
		c, err := e.p.CheckSnapshot(nil)
		if err != nil || c.Ignored != "" || c.Seq == 0 {
			t.Errorf("check %d: %+v, %v; want the stored snapshot checked", i, c, err)
			break
		}
	}
	close(stop)
	if err := <-saved; err != nil {
		t.Fatal(err)
	}
}

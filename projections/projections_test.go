package projections

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"demosvc/eventlog"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/vmihailenco/msgpack/v5"
)

// stepClock advances one second per reading, so every commit has its own
// time and updated_at visibly moves.
type stepClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *stepClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Second)
	return c.t
}

type env struct {
	t     testing.TB
	dir   string
	store *eventlog.Store
	log   *eventlog.Log
	p     *Projections
	// faulty stores are not closed: Pebble may stay wedged after a failed
	// WAL sync.
	faulty bool
}

func openEnv(t testing.TB, dir string, opts Options) *env {
	t.Helper()
	clock := &stepClock{t: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)}
	return openEnvClock(t, dir, opts, clock.now)
}

// openEnvClock is openEnv with the log's clock given.
func openEnvClock(t testing.TB, dir string, opts Options, now eventlog.Clock) *env {
	t.Helper()
	return openEnvOn(t, dir, opts, eventlog.StoreOptions{}, now)
}

// openEnvOn is openEnvClock on a store opened with storeOpts (a
// fault-injecting FS, say).
func openEnvOn(t testing.TB, dir string, opts Options, storeOpts eventlog.StoreOptions, now eventlog.Clock) *env {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	storeOpts.Create = true
	store, err := eventlog.OpenStore(dir, storeOpts)
	if err != nil {
		t.Fatal(err)
	}
	log, err := eventlog.OpenLog(store, eventlog.Options{Registry: NewRegistry(), IDs: eventlog.NewIDs(now)})
	if err != nil {
		t.Fatal(err)
	}
	if opts.Sealer == nil {
		opts.Sealer, err = eventlog.NewSealer(make([]byte, eventlog.MasterKeySize), crand.Reader)
		if err != nil {
			t.Fatal(err)
		}
	}
	p, err := Open(log, opts)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, dir: dir, store: store, log: log, p: p, faulty: storeOpts.FS != nil}
	t.Cleanup(e.close)
	return e
}

func (e *env) close() {
	if e.p != nil {
		e.p.Close()
		e.log.Close()
		if !e.faulty {
			e.store.Close()
		}
		e.p = nil
	}
}

func (e *env) account(name string) Principal {
	e.t.Helper()
	acc, err := e.p.CreateAccount(context.Background(), "cli", name, PlanPro, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	return Principal{Account: acc, KeyID: "key_test"}
}

func (e *env) agent(pr Principal, name string) AgentView {
	e.t.Helper()
	v, err := e.p.CreateAgent(context.Background(), pr, AgentInput{Name: name, SandboxURL: "https://sandbox.example.com/" + name}, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	return v.(AgentView)
}

// webhook registers a webhook of pr's account on events and returns its id.
func (e *env) webhook(pr Principal, events ...string) string {
	e.t.Helper()
	v, err := e.p.RegisterWebhook(context.Background(), pr, WebhookInput{URL: "https://hooks.example.com/x", Events: events}, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	return v.(WebhookView).ID
}

// sessionFields is what the tests read of a session's JSON.
type sessionFields struct {
	ID            string `json:"id"`
	ContactID     string `json:"contact_id"`
	Status        string `json:"status"`
	MeetingBooked bool   `json:"meeting_booked"`
}

// fields decodes the answer of a session command, or of SessionJSON.
func fields(t testing.TB, v any) sessionFields {
	t.Helper()
	var f sessionFields
	if err := json.Unmarshal(v.(json.RawMessage), &f); err != nil {
		t.Fatalf("a session's JSON: %v", err)
	}
	return f
}

func (e *env) session(pr Principal, agentID, email string) sessionFields {
	e.t.Helper()
	v, err := e.p.StartSession(context.Background(), pr, SessionInput{AgentID: agentID, Contact: &Contact{Name: "P", Email: email}}, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	return fields(e.t, v)
}

// dump renders everything the state holds, in a fixed order, so two
// states can be compared.
func dump(s *State) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	fmt.Fprintf(&b, "seq %d\n", s.seq)
	for _, a := range s.accountOrder {
		enc.Encode(a)
		t := s.tenants[a.ID]
		for _, ag := range t.agents {
			enc.Encode(ag.view(true))
			fmt.Fprintf(&b, " agent seq %d sessions %d\n", ag.seq, ag.sessions.len())
		}
		for n := range t.contacts.all() {
			c := s.contacts.num(n)
			enc.Encode(s.contactView(c))
			var sessions []string
			all := s.sessionsOfContact(c)
			for i := range all.len() {
				sessions = append(sessions, FormatID(PrefixSession, all.at(i).id))
			}
			fmt.Fprintf(&b, " contact sessions %v, by email %v\n", sessions, t.emails.get(s, emailKey(s.text.str(c.email))) == c)
		}
		for n := range t.sessions.all() {
			ses := s.sessions.num(n)
			fmt.Fprintf(&b, "%s\n", s.appendSession(nil, ses))
			var m [3]any
			if mt := s.meetingOf(ses); mt != nil {
				m = [3]any{s.text.str(mt.scheduledAt), s.text.str(mt.calendarLink), mt.seq}
			}
			fmt.Fprintf(&b, " hot %v %v meeting %v events %v\n", ses.hot, ses.hotSignals, m, s.eventsOf(ses))
		}
		for _, w := range t.webhooks {
			enc.Encode(w.view())
			fmt.Fprintf(&b, " webhook seq %d secret %x previous %x until %d disabled at %d skipped %v version %d earlier %v since %d\n", w.seq, w.secret, w.prevSecret, w.prevUntil, w.disabledSeq, w.skipped, w.version, w.earlier, w.eventsSince)
		}
		fmt.Fprintf(&b, " e-mails indexed %d\n", len(t.emails.byHash)+len(t.emails.clash))
		fmt.Fprintf(&b, " active agents %d, hot:", t.stats.activeAgents)
		t.hot.Ascend(refDump(&b, s))
		for _, d := range slices.Sorted(maps.Keys(t.stats.days)) {
			fmt.Fprintf(&b, "\n day %d %+v", d, *t.stats.days[d])
		}
		for _, ag := range t.agents {
			fmt.Fprintf(&b, "\n agent meetings %d", ag.meetings)
		}
		fmt.Fprintf(&b, "\n events %v\n", t.events.seqsBefore(0, t.events.len()))
		for st, tree := range t.byStatus {
			fmt.Fprintf(&b, " status %d:", st)
			tree.Ascend(refDump(&b, s))
			b.WriteString("\n")
		}
	}
	for _, k := range s.keyOrder {
		enc.Encode(k)
		fmt.Fprintf(&b, " hash %x created by %s\n", k.Hash, k.CreatedBy)
	}
	dumpUsers(&b, s)
	return b.String()
}

func (e *env) liveDump() string {
	var d string
	e.p.View(func(s *State) { d = dump(s) })
	return d
}

// TestStateIsAPureFunctionOfTheLog runs random command sequences, with
// snapshots taken while commands of every kind run between the steps of
// their encoding, then rebuilds the state from the log alone and from a
// snapshot plus the tail: all three must be identical, and every snapshot
// must be the state at its own seq.
func TestStateIsAPureFunctionOfTheLog(t *testing.T) {
	defer func(n int) { replayBatch = n }(replayBatch)
	replayBatch = 5 // replays read hundreds of batches, each filled again once applied
	for seed := uint64(1); seed <= 5; seed++ {
		t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) {
			e := openEnv(t, "", DefaultOptions)
			g := newOpGen(t, e, seed)
			inSnapshot := false
			g.onSnapshot = func() {
				if inSnapshot {
					return
				}
				inSnapshot = true
				defer func() { inSnapshot = false }()
				between := 0
				seq, err := e.p.saveSnapshot(3, func() {
					if between++; between <= 30 {
						g.step()
					}
				})
				if err != nil {
					t.Fatal(err)
				}
				e.checkStoredSnapshot(seq)
			}
			for range 600 {
				g.step()
			}
			g.onSnapshot()
			// A tail after the snapshot.
			g.onSnapshot = nil
			for range 40 {
				g.step()
			}
			live := e.liveDump()

			full, err := ReplayLog(e.log, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := dump(full); got != live {
				t.Errorf("state replayed from the log differs from the live state:\n%s", firstDiff(got, live))
			}
			snap, why := loadSnapshot(e.store)
			if snap == nil {
				t.Fatalf("no snapshot: %s", why)
			}
			if snap.seq == e.log.DurableSeq() {
				t.Fatal("the snapshot has no tail to replay")
			}
			tail, err := ReplayLog(e.log, snap)
			if err != nil {
				t.Fatal(err)
			}
			if got := dump(tail); got != live {
				t.Errorf("snapshot + tail differs from the live state:\n%s", firstDiff(got, live))
			}
		})
	}
}

func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < min(len(al), len(bl)); i++ {
		if al[i] != bl[i] {
			return fmt.Sprintf("line %d:\n got  %s\n want %s", i+1, al[i], bl[i])
		}
	}
	return fmt.Sprintf("lengths differ: %d and %d lines", len(al), len(bl))
}

// TestRacingTransitionsEndEachSessionOnce has 64 goroutines complete,
// abandon and book meetings on the same sessions at once.
func TestRacingTransitionsEndEachSessionOnce(t *testing.T) {
	e := openEnv(t, "", DefaultOptions)
	pr := e.account("acme")
	ag := e.agent(pr, "ava")
	const n = 20
	var ids []string
	for i := 0; i < n; i++ {
		ids = append(ids, e.session(pr, ag.ID, fmt.Sprintf("p%d@example.com", i)).ID)
	}
	ctx := context.Background()
	var ended, meetings atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 64; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, id := range ids {
				var err error
				switch g % 3 {
				case 0:
					s, d, u := 50, 60, "https://replay.example.com/r"
					_, err = e.p.CompleteSession(ctx, pr, id, Figures{IntentScore: &s, Signals: &Signals{}, DurationSeconds: &d, ReplayURL: &u}, nil)
					if err == nil {
						ended.Add(1)
					}
				case 1:
					_, err = e.p.AbandonSession(ctx, pr, id, Figures{}, nil)
					if err == nil {
						ended.Add(1)
					}
				default:
					_, err = e.p.BookMeeting(ctx, pr, id, MeetingInput{ScheduledAt: "2026-12-01T10:00:00Z", CalendarLink: "https://cal.example.com"}, nil)
					if err == nil {
						meetings.Add(1)
					}
				}
				if err != nil && !isCode(err, EInvalidState) {
					t.Errorf("%s: %v", id, err)
				}
			}
		}()
	}
	wg.Wait()
	if ended.Load() != n {
		t.Errorf("%d successful terminal transitions for %d sessions", ended.Load(), n)
	}
	counts := map[string]map[string]int{}
	err := e.log.Read(1, 0, func(rec *eventlog.Record) error {
		v, err := e.log.Registry().Decode(rec)
		if err != nil {
			return err
		}
		var sid string
		switch p := v.(type) {
		case *SessionCompleted:
			sid = p.SessionID
		case *SessionAbandoned:
			sid = p.SessionID
		case *MeetingBooked:
			sid = p.SessionID
		default:
			return nil
		}
		if counts[sid] == nil {
			counts[sid] = map[string]int{}
		}
		counts[sid][rec.Type]++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var bookedInLog int64
	for _, id := range ids {
		c := counts[id]
		if c[TypeSessionCompleted]+c[TypeSessionAbandoned] != 1 {
			t.Errorf("%s: %d completed and %d abandoned events, want exactly one terminal event", id, c[TypeSessionCompleted], c[TypeSessionAbandoned])
		}
		if c[TypeMeetingBooked] > 1 {
			t.Errorf("%s: %d meeting.booked events", id, c[TypeMeetingBooked])
		}
		bookedInLog += int64(c[TypeMeetingBooked])
		b, err := e.p.SessionJSON(nil, pr.Account.ID, id)
		if err != nil {
			t.Fatal(err)
		}
		v := fields(t, json.RawMessage(b))
		if v.Status == StatusInProgress {
			t.Errorf("%s still in progress", id)
		}
		if v.MeetingBooked != (c[TypeMeetingBooked] == 1) {
			t.Errorf("%s: meeting_booked %v but %d meeting events", id, v.MeetingBooked, c[TypeMeetingBooked])
		}
	}
	if bookedInLog != meetings.Load() {
		t.Errorf("%d meetings acknowledged, %d in the log", meetings.Load(), bookedInLog)
	}
}

// TestABurstOfChangesKeepsUpdatedAtNearTheClock: under a clock that
// stands still, each change of a burst shows a later updated_at, up to
// maxUpdatedAtLead seconds ahead; later ones show that, not minutes ahead.
func TestABurstOfChangesKeepsUpdatedAtNearTheClock(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	e := openEnvClock(t, "", DefaultOptions, func() time.Time { return now })
	pr := e.account("acme")
	ag := e.agent(pr, "ava")
	last := ag.UpdatedAt
	for i := 1; i <= 50; i++ {
		persona := fmt.Sprint("persona ", i)
		got, err := e.p.UpdateAgent(context.Background(), pr, ag.ID, AgentPatch{Persona: &persona})
		if err != nil {
			t.Fatal(err)
		}
		want := now.Add(time.Duration(min(i, maxUpdatedAtLead)) * time.Second).Format(time.RFC3339)
		if got.UpdatedAt != want {
			t.Fatalf("change %d of a burst in one second: updated_at %s, want %s (the one before: %s)", i, got.UpdatedAt, want, last)
		}
		last = got.UpdatedAt
	}
}

func TestUpdateAgentBumpsUpdatedAtOnlyWhenAFieldIsSent(t *testing.T) {
	e := openEnv(t, "", DefaultOptions)
	pr := e.account("acme")
	ag := e.agent(pr, "ava")
	same, err := e.p.UpdateAgent(context.Background(), pr, ag.ID, AgentPatch{})
	if err != nil {
		t.Fatal(err)
	}
	if same.UpdatedAt != ag.UpdatedAt {
		t.Errorf("an empty patch moved updated_at from %s to %s", ag.UpdatedAt, same.UpdatedAt)
	}
	name := ag.Name // the same value still counts as sent
	got, err := e.p.UpdateAgent(context.Background(), pr, ag.ID, AgentPatch{Name: &name})
	if err != nil {
		t.Fatal(err)
	}
	if got.UpdatedAt <= ag.UpdatedAt { // RFC 3339 UTC strings sort as times
		t.Errorf("updated_at %s did not move past %s", got.UpdatedAt, ag.UpdatedAt)
	}
	if got.CreatedAt != ag.CreatedAt {
		t.Error("created_at moved")
	}
	if got.Persona != nil {
		t.Error("the update result carries a persona")
	}
}

func TestLeadHotIsRecordedOncePerSession(t *testing.T) {
	e := openEnv(t, "", Options{HotThreshold: 70})
	pr := e.account("acme")
	ses := e.session(pr, e.agent(pr, "ava").ID, "p@example.com")
	ctx := context.Background()
	for _, s := range []int{69, 70, 95} {
		s := s
		if _, err := e.p.ProgressSession(ctx, pr, ses.ID, Figures{IntentScore: &s}, nil); err != nil {
			t.Fatal(err)
		}
	}
	var hot []string
	e.log.Read(1, 0, func(rec *eventlog.Record) error {
		if rec.Type == TypeLeadHot {
			v, _ := e.log.Registry().Decode(rec)
			hot = append(hot, fmt.Sprintf("%d/%d", v.(*LeadHot).IntentScore, v.(*LeadHot).Threshold))
		}
		return nil
	})
	if fmt.Sprint(hot) != "[70/70]" {
		t.Errorf("lead.hot events = %v, want [70/70]", hot)
	}
}

func TestRestartWithAndWithoutSnapshotShowsTheSameState(t *testing.T) {
	dir := t.TempDir()
	e := openEnv(t, dir, DefaultOptions)
	pr := e.account("acme")
	ag := e.agent(pr, "ava")
	for i := 0; i < 30; i++ {
		e.session(pr, ag.ID, fmt.Sprintf("p%d@example.com", i%7))
	}
	want := e.liveDump()
	e.close() // Close saves a snapshot.

	e = openEnv(t, dir, DefaultOptions)
	if info := e.p.LoadInfo(); info.SnapshotSeq == 0 || info.Replayed != 0 {
		t.Errorf("after a clean stop: %+v, want the snapshot and nothing replayed", info)
	}
	if got := e.liveDump(); got != want {
		t.Errorf("state from the snapshot differs:\n%s", firstDiff(got, want))
	}
	e.close()

	t.Run("damaged snapshot is ignored", func(t *testing.T) {
		store, err := eventlog.OpenStore(dir, eventlog.StoreOptions{})
		if err != nil {
			t.Fatal(err)
		}
		meta := storedSnapMeta(t, store)
		chunk, _, _ := store.Get(snapChunkKey(meta.Slot, 0))
		chunk[len(chunk)/2] ^= 1
		if err := store.WriteSync([]eventlog.Put{{Key: snapChunkKey(meta.Slot, 0), Value: chunk}}, nil, nil); err != nil {
			t.Fatal(err)
		}
		store.Close()
		e := openEnv(t, dir, DefaultOptions)
		info := e.p.LoadInfo()
		if info.SnapshotSeq != 0 || !strings.Contains(info.Ignored, "checksum") {
			t.Errorf("load info %+v, want the damaged snapshot ignored", info)
		}
		// log verify says so too, without calling the log bad.
		if c, err := CheckSnapshot(e.log, nil); err != nil || c.Seq != 0 || !strings.Contains(c.Ignored, "checksum") {
			t.Errorf("CheckSnapshot: %+v, %v; want the damaged snapshot named as ignored", c, err)
		}
		if got := e.liveDump(); got != want {
			t.Errorf("state from a full replay differs:\n%s", firstDiff(got, want))
		}
		e.close()
	})
	t.Run("metadata naming too many chunks is ignored", func(t *testing.T) {
		e := openEnv(t, dir, DefaultOptions) // a good snapshot again
		e.close()
		store, err := eventlog.OpenStore(dir, eventlog.StoreOptions{})
		if err != nil {
			t.Fatal(err)
		}
		meta := storedSnapMeta(t, store)
		meta.Chunks = 1 << 40 // start-up would allocate a petabyte for it
		mb, _ := msgpack.Marshal(&meta)
		if err := store.WriteSync([]eventlog.Put{{Key: snapMetaKey, Value: mb}}, nil, nil); err != nil {
			t.Fatal(err)
		}
		store.Close()
		e = openEnv(t, dir, DefaultOptions)
		if info := e.p.LoadInfo(); info.SnapshotSeq != 0 || !strings.Contains(info.Ignored, "chunks") {
			t.Errorf("load info %+v, want the snapshot ignored for its chunk count", info)
		}
		if got := e.liveDump(); got != want {
			t.Errorf("state differs:\n%s", firstDiff(got, want))
		}
		e.close()
	})
	t.Run("snapshot of another version is ignored", func(t *testing.T) {
		e := openEnv(t, dir, DefaultOptions) // Close above rewrote a good snapshot
		e.close()
		store, _ := eventlog.OpenStore(dir, eventlog.StoreOptions{})
		meta := []byte{0x84} // a msgpack map that names another version
		store.WriteSync([]eventlog.Put{{Key: snapMetaKey, Value: append(meta, []byte("\xa1v\x63\xa1s\x01\xa1n\x01\xa1h\xc0")...)}}, nil, nil)
		store.Close()
		e = openEnv(t, dir, DefaultOptions)
		if info := e.p.LoadInfo(); info.SnapshotSeq != 0 || info.Ignored == "" {
			t.Errorf("load info %+v, want the snapshot ignored", info)
		}
		if got := e.liveDump(); got != want {
			t.Errorf("state differs:\n%s", firstDiff(got, want))
		}
	})
}

// isCode reports whether err is an *Error with code.
func isCode(err error, code string) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}

// A snapshot replaces the stored one in one step: a save whose table
// cannot be written leaves the stored one whole, and a save drops whatever
// the keyspace held, also a store laid out by earlier builds (the snapshot
// in slot 1, half a save's chunks in slot 0).
func TestAnInterruptedSnapshotSaveLeavesTheStoredOneWhole(t *testing.T) {
	dir := t.TempDir()
	e := openEnv(t, dir, DefaultOptions)
	pr := e.account("acme")
	e.agent(pr, "kept")
	seq, err := e.p.SaveSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	// The same snapshot as an older build left it.
	var old []eventlog.Put
	if err := e.store.Scan([]byte{eventlog.KeyspaceSnapshot}, func(k, v []byte) error {
		var meta snapMeta
		switch {
		case bytes.Equal(k, snapMetaKey):
			if err := msgpack.Unmarshal(v, &meta); err != nil {
				return err
			}
			meta.Slot = 1
			mb, err := msgpack.Marshal(&meta)
			old = append(old, eventlog.Put{Key: snapMetaKey, Value: mb})
			return err
		default:
			moved := append([]byte(nil), k...)
			moved[len(snapChunkPrefix)] = 1
			old = append(old, eventlog.Put{Key: moved, Value: append([]byte(nil), v...)})
			return nil
		}
	}); err != nil {
		t.Fatal(err)
	}
	if err := e.store.WriteSync(old, snapChunkKey(0, 0), snapChunkKey(0, 1<<31)); err != nil {
		t.Fatal(err)
	}
	if err := e.store.WriteSync([]eventlog.Put{{Key: snapChunkKey(0, 3), Value: []byte("half a snapshot")}}, nil, nil); err != nil {
		t.Fatal(err)
	}
	e.close()

	var failWrites atomic.Bool
	fs := errorfs.Wrap(vfs.Default, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if failWrites.Load() && op.Kind == errorfs.OpFileWrite && strings.HasSuffix(op.Path, ".sst.tmp") {
			return errors.New("injected write error")
		}
		return nil
	}))
	e = openEnvOn(t, dir, DefaultOptions, eventlog.StoreOptions{FS: fs}, (&stepClock{t: time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)}).now)
	if info := e.p.LoadInfo(); info.SnapshotSeq != seq || info.Ignored != "" {
		t.Fatalf("load info %+v, want the older build's snapshot at seq %d", info, seq)
	}
	e.agent(pr, "after")
	failWrites.Store(true)
	if _, err := e.p.SaveSnapshot(); err == nil {
		t.Fatal("a save succeeded through a failing write")
	}
	failWrites.Store(false)
	if stored, why := loadSnapshot(e.store); stored == nil || stored.seq != seq {
		t.Fatalf("after a failed save, the stored snapshot is %v (%s), want the one at seq %d", stored, why, seq)
	}
	next, err := e.p.SaveSnapshot()
	if err != nil || next <= seq {
		t.Fatalf("save: seq %d, %v; want past %d", next, err, seq)
	}
	var keys []string
	if err := e.store.Scan([]byte{eventlog.KeyspaceSnapshot}, func(k, _ []byte) error {
		keys = append(keys, fmt.Sprintf("%q", k))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if want := []string{fmt.Sprintf("%q", snapChunkKey(0, 0)), fmt.Sprintf("%q", snapMetaKey)}; !slices.Equal(keys, want) {
		t.Errorf("after a save the keyspace holds %v, want %v", keys, want)
	}
	if stored, why := loadSnapshot(e.store); stored == nil || stored.seq != next {
		t.Errorf("the stored snapshot is %v (%s), want the one at seq %d", stored, why, next)
	}
}

// TestSnapshotsSpreadOutAsTheStateGrows: snapshots are taken every
// SnapshotEvery events while the state is small, and one event per
// snapshotBytesPerEvent bytes of the last snapshot once that is more.
func TestSnapshotsSpreadOutAsTheStateGrows(t *testing.T) {
	if got := snapshotInterval(0, 1<<30); got != 0 {
		t.Errorf("interval with snapshot.every 0 = %d, want 0 (only at Close)", got)
	}
	if got := snapshotInterval(100, 1000); got != 100 {
		t.Errorf("interval for a small state = %d, want snapshot.every (100)", got)
	}
	if got := snapshotInterval(100_000, 200<<20); got != 200<<20/snapshotBytesPerEvent {
		t.Errorf("interval for a 200 MB snapshot = %d, want %d", got, 200<<20/snapshotBytesPerEvent)
	}

	opts := DefaultOptions
	opts.SnapshotEvery = 10
	e := openEnv(t, "", opts)
	defer e.close()
	pr := e.account("acme")
	ag := e.agent(pr, "ava")
	for i := 0; e.p.Seq() < 12; i++ {
		e.session(pr, ag.ID, fmt.Sprintf("p%d@example.com", i))
	}
	pollUntil(t, "the first snapshot", func() bool { return e.p.snapSeq.Load() > 0 && !e.p.snapRunning.Load() })
	last := e.p.snapSeq.Load()
	if e.p.snapSize.Load() == 0 {
		t.Fatal("the snapshot's size was not kept")
	}
	// As if the last snapshot had been 1 MiB: the next comes 2,048 events
	// after it, not 10.
	e.p.snapSize.Store(1 << 20)
	if e.p.maybeSnapshot(last + 10) {
		t.Errorf("a snapshot started 10 events after the last one of 1 MiB")
	}
	if !e.p.maybeSnapshot(last + 2048) {
		t.Errorf("no snapshot started 2,048 events after the last one of 1 MiB")
	}
	pollUntil(t, "the second snapshot", func() bool { return !e.p.snapRunning.Load() })
}

// pollUntil polls cond until it holds, failing the test after 10 s.
func pollUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after 10 s", what)
		}
		time.Sleep(time.Millisecond) // polling interval
	}
}

// storedSnapMeta reads the stored snapshot's metadata.
func storedSnapMeta(t *testing.T, store *eventlog.Store) snapMeta {
	t.Helper()
	mb, _, _ := store.Get(snapMetaKey)
	var meta snapMeta
	if err := msgpack.Unmarshal(mb, &meta); err != nil {
		t.Fatal(err)
	}
	return meta
}

// refDump writes the seq of each session of a tree, and where the tree's
// entry names another seq than its session's, that too.
func refDump(b *strings.Builder, s *State) func(sesRef) bool {
	return func(r sesRef) bool {
		ses := s.sessions.num(r.n)
		fmt.Fprintf(b, " %d", ses.seq)
		if r.seq != ses.seq {
			fmt.Fprintf(b, " (the tree says %d)", r.seq)
		}
		return true
	}
}

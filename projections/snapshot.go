package projections

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
	"golang.org/x/time/rate"

	"demosvc/eventlog"
)

// snapshotVersion changes whenever the state's layout does: a snapshot of
// another version is ignored and the log replayed in full. Version 7 adds
// the overview's per-day counters, each session's event seqs and each
// account's event seqs, which a version-6 snapshot cannot give (it has no
// time of a lead.hot or a meeting): the first start after an upgrade
// replays the log once, and its snapshot is of version 7. Version 9 adds
// each webhook's earlier lists of events, which the log alone gives (8
// had them without the seq of the list in force, for a day's builds).
// Version 10 is the same layout under two new rules of replay (an agent's
// updated_at moves by at least a second at every change; a user keeps at
// most 100 sessions): a snapshot of version 9 holds what the old rules
// gave, which a replay under the new ones need not give again. Version 11
// keeps each webhook's windows skipped by skip_backlog (and the seq that
// disabled it), where 10 kept the seq of the last such enabling. Version
// 12 is 11's layout under new rules of replay: an agent's updated_at runs
// at most maxUpdatedAtLead seconds ahead of its change's time, and a
// webhook.disabled of a disabled webhook changes only its reason.
const snapshotVersion = 12

// snapshotChunk bounds one stored value of a snapshot.
const snapshotChunk = 1 << 20

// maxSnapshotChunks bounds what a (damaged) snapshot's metadata can make
// start-up allocate: 64 GiB, far past any state this process holds.
const maxSnapshotChunks = 1 << 16

var (
	snapMetaKey     = []byte{eventlog.KeyspaceSnapshot, 'm'}
	snapChunkPrefix = []byte{eventlog.KeyspaceSnapshot, 'c'}
)

type snapMeta struct {
	Slot    uint8    `msgpack:"sl"` // which chunk slot holds it (see snapChunkKey)
	Version int      `msgpack:"v"`
	Seq     uint64   `msgpack:"s"`
	Chunks  int      `msgpack:"n"`
	Sum     [32]byte `msgpack:"h"`
	// Chain is the hash of the log's record at Seq when the snapshot was
	// taken: a log rewritten behind it, or a snapshot from another data
	// dir, shows as a record that differs (snapshotOnLog). Zero in a
	// snapshot written before it was kept.
	Chain [eventlog.HashSize]byte `msgpack:"c"`
}

// snapChunkKey is the key of chunk i in slot 0 or 1. Earlier builds wrote
// each snapshot into the slot the stored one did not use, then its
// metadata; a snapshot now replaces the keyspace whole (an
// eventlog.Replacement), in slot 0, and the slot in the metadata lets
// this build read the others.
func snapChunkKey(slot uint8, i int) []byte {
	k := append(append([]byte(nil), snapChunkPrefix...), slot)
	return binary.BigEndian.AppendUint32(k, uint32(i))
}

// snapshotWriteRate paces the chunks of a snapshot (bytes per second):
// they reach the disk beside the log's commits, whose fsyncs the state's
// readers wait for, so a large snapshot must not flood the device at once.
const snapshotWriteRate = 32 << 20

// encodeSnapshot writes the whole state at once. The caller holds the
// state at least read-locked. SaveSnapshot encodes in steps instead (see
// snapshot_cut.go); both write what encode writes.
func (s *State) encodeSnapshot() ([]byte, error) {
	return s.cutAt().encode(&snapWriter{}, 0, nil)
}

// The values of one object, in the snapshot's order. decodeSnapshot reads
// them back in the same order.

func (w *snapWriter) account(a *Account) {
	w.str(a.ID)
	w.str(a.Name)
	w.str(a.Plan)
	w.int(int64(a.RateLimitPerMinute))
	w.time(a.CreatedAt)
}

func (w *snapWriter) key(k *APIKey) {
	w.str(k.ID)
	w.str(k.AccountID)
	w.bytes(k.Hash[:])
	w.str(k.Last4)
	w.time(k.CreatedAt)
	if k.RevokedAt != nil {
		w.bool(true)
		w.time(*k.RevokedAt)
	} else {
		w.bool(false)
	}
}

func (w *snapWriter) agent(a *agent) {
	w.bytes(a.id[:])
	w.uint(a.seq)
	w.str(a.name)
	w.str(a.sandboxURL)
	w.str(a.persona)
	w.bool(a.active)
	w.int(a.createdAt)
	w.int(a.updatedAt)
}

func (w *snapWriter) contact(s *State, c *contact) {
	w.bytes(c.id[:])
	w.uint(c.seq)
	w.str(s.text.str(c.name))
	w.str(s.text.str(c.email))
	w.str(s.text.str(c.company))
	w.int(c.createdAt)
}

func (w *snapWriter) session(s *State, ses *session) {
	w.bytes(ses.id[:])
	w.bytes(s.agentOf(ses).id[:])
	w.bytes(s.contactOf(ses).id[:])
	w.uint(ses.seq)
	w.int(ses.startedAt)
	w.int(ses.endedAt)
	w.str(s.text.str(ses.replayURL))
	w.int(int64(ses.duration))
	w.uint(uint64(ses.status))
	w.uint(uint64(ses.score))
	w.bytes(ses.signals[:])
	w.bool(ses.hot)
	w.bytes(ses.hotSignals[:])
	if m := s.meetingOf(ses); m != nil {
		w.bool(true)
		w.str(s.text.str(m.scheduledAt))
		w.str(s.text.str(m.calendarLink))
		w.uint(m.seq)
	} else {
		w.bool(false)
	}
	events := s.eventsOf(ses)
	w.len(len(events))
	prev := ses.seq
	for _, seq := range events {
		w.uint(seq - prev)
		prev = seq
	}
}

func (w *snapWriter) webhook(wh *webhook) {
	w.str(wh.id)
	w.uint(wh.seq)
	w.str(wh.url)
	w.len(len(wh.events))
	for _, e := range wh.events {
		w.str(e)
	}
	w.uint(wh.eventsSince)
	w.len(len(wh.earlier))
	for _, sub := range wh.earlier {
		w.uint(sub.until)
		w.len(len(sub.events))
		for _, e := range sub.events {
			w.str(e)
		}
	}
	w.bytes(wh.secret)
	w.int(wh.createdAt)
	w.bool(wh.disabled)
	w.str(wh.disabledReason)
	w.int(wh.disabledAt)
	w.int(int64(wh.rateLimit))
	w.bytes(wh.prevSecret)
	w.int(wh.prevUntil)
	w.uint(wh.disabledSeq)
	w.len(len(wh.skipped))
	for _, sk := range wh.skipped {
		w.uint(sk.after)
		w.uint(sk.through)
	}
	w.uint(wh.version)
}

// snapWriter appends the snapshot's values: unsigned varints, zigzag
// varints, and length-prefixed bytes. A plain codec: the snapshot is
// bookkeeping that only this code reads, and it must load fast.
type snapWriter struct {
	buf    []byte
	err    error
	sink   func(chunk []byte) error // where emit hands whole chunks; nil: buf keeps all, never emitted
	size   int64                    // bytes handed to sink so far
	chunks int                      // and in how many chunks
}

func (w *snapWriter) uint(v uint64)    { w.buf = binary.AppendUvarint(w.buf, v) }
func (w *snapWriter) int(v int64)      { w.buf = binary.AppendVarint(w.buf, v) }
func (w *snapWriter) len(n int)        { w.uint(uint64(n)) }
func (w *snapWriter) str(v string)     { w.uint(uint64(len(v))); w.buf = append(w.buf, v...) }
func (w *snapWriter) bytes(v []byte)   { w.uint(uint64(len(v))); w.buf = append(w.buf, v...) }
func (w *snapWriter) time(t Timestamp) { w.int(unix(timeOf(t))) }

func (w *snapWriter) bool(v bool) {
	if v {
		w.buf = append(w.buf, 1)
	} else {
		w.buf = append(w.buf, 0)
	}
}

// snapReader reads what snapWriter wrote, keeping the first error; after
// an error every read returns zero values.
type snapReader struct {
	b   []byte
	err error
}

var errShortSnapshot = errors.New("snapshot ends early")

func (r *snapReader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
	r.b = nil
}

func (r *snapReader) uint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail(errShortSnapshot)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *snapReader) int() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail(errShortSnapshot)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *snapReader) len() int {
	n := r.uint()
	if n > uint64(len(r.b)) { // every item takes at least a byte
		r.fail(errShortSnapshot)
		return 0
	}
	return int(n)
}

func (r *snapReader) raw() []byte {
	n := r.uint()
	if n > uint64(len(r.b)) {
		r.fail(errShortSnapshot)
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *snapReader) str() string { return string(r.raw()) }

// text reads a string into t's blocks.
func (r *snapReader) text(t *text) textRef { return t.keepBytes(r.raw()) }

func (r *snapReader) bool() bool {
	if len(r.b) == 0 {
		r.fail(errShortSnapshot)
		return false
	}
	v := r.b[0] == 1
	r.b = r.b[1:]
	return v
}

func (r *snapReader) fixed(dst []byte) {
	b := r.raw()
	if r.err == nil && len(b) != len(dst) {
		r.fail(fmt.Errorf("want %d bytes, got %d", len(dst), len(b)))
	}
	copy(dst, b)
}

func (r *snapReader) time() Timestamp { return stamp(r.int()) }
func (r *snapReader) id() (id ID)     { r.fixed(id[:]); return id }

// decodeSnapshot rebuilds a state from encodeSnapshot's bytes.
func decodeSnapshot(b []byte) (*State, error) {
	s := NewState()
	r := &snapReader{b: b}
	s.seq = r.uint()
	// Size the maps once rather than growing them a million times.
	s.agents = make(map[ID]*agent, r.len())
	s.contacts.presize(r.len())
	s.sessions.presize(r.len())
	for i, n := 0, r.len(); i < n && r.err == nil; i++ {
		a := &Account{ID: r.str(), Name: r.str(), Plan: r.str(), RateLimitPerMinute: int(r.int()), CreatedAt: r.time()}
		s.accounts[a.ID] = a
		s.accountOrder = append(s.accountOrder, a)
		s.addTenant(a)
	}
	for i, n := 0, r.len(); i < n && r.err == nil; i++ {
		k := &APIKey{ID: r.str(), AccountID: r.str()}
		r.fixed(k.Hash[:])
		k.Last4, k.CreatedAt = r.str(), r.time()
		if r.bool() {
			t := r.time()
			k.RevokedAt = &t
		}
		s.keys[k.ID] = k
		s.keysByHash[k.Hash] = k
		s.keyOrder = append(s.keyOrder, k)
	}
	for _, acc := range s.accountOrder {
		if r.err != nil {
			break
		}
		t := s.tenants[acc.ID]
		t.agents = make([]*agent, r.len())
		for i := range t.agents {
			a := &agent{id: r.id(), tenant: t, seq: r.uint(), name: r.str(), sandboxURL: r.str(), persona: r.str(),
				active: r.bool(), createdAt: r.int(), updatedAt: r.int()}
			t.agents[i] = a
			s.addAgent(a)
		}
		for range r.len() {
			id := r.id()
			c, n := s.contacts.addNumbered(id, contact{id: id, tenant: t.num, seq: r.uint(), name: r.text(&s.text),
				email: r.text(&s.text), company: r.text(&s.text), createdAt: r.int()})
			c.num = n
			t.contacts.add(n)
			t.emails.add(s, emailKey(s.text.str(c.email)), n)
		}
		for range r.len() {
			id := r.id()
			a, c := s.agents[r.id()], s.contacts.at(r.id())
			ses, n := s.sessions.addNumbered(id, session{id: id, seq: r.uint(),
				startedAt: r.int(), endedAt: r.int(), replayURL: r.text(&s.text), duration: int32(r.int()),
				status: sessionStatus(r.uint()), score: uint8(r.uint())})
			ses.num = n
			r.fixed(ses.signals[:])
			ses.hot = r.bool()
			r.fixed(ses.hotSignals[:])
			if r.bool() {
				s.addMeeting(ses, meeting{scheduledAt: r.text(&s.text), calendarLink: r.text(&s.text), seq: r.uint()})
			}
			if n := r.len(); n > 0 {
				prev := ses.seq
				for range n {
					prev += r.uint()
					s.addEvent(ses, prev)
				}
			}
			if r.err != nil {
				break
			}
			if a == nil || c == nil || ses.status >= statusCount {
				return nil, fmt.Errorf("snapshot: session %s refers to what it does not hold", FormatID(PrefixSession, ses.id))
			}
			ses.agent, ses.contact = a.num, c.num
			t.sessions.add(n)
			a.sessions.add(n)
			s.addContactSession(c, ses)
			t.byStatus[ses.status].ReplaceOrInsert(sesRef{ses.seq, n})
			if ses.hot {
				t.hot.ReplaceOrInsert(sesRef{ses.seq, n})
			}
		}
		t.webhooks = make([]*webhook, r.len())
		for i := range t.webhooks {
			wh := &webhook{id: r.str(), tenant: t, seq: r.uint(), url: r.str()}
			wh.events = make([]string, r.len())
			for j := range wh.events {
				wh.events[j] = r.str()
			}
			wh.eventsSince = r.uint()
			if n := r.len(); n > 0 {
				wh.earlier = make([]subscription, n)
				for j := range wh.earlier {
					sub := &wh.earlier[j]
					sub.until = r.uint()
					sub.events = make([]string, r.len())
					for k := range sub.events {
						sub.events[k] = r.str()
					}
				}
			}
			wh.secret = append(eventlog.Sealed(nil), r.raw()...)
			wh.createdAt = r.int()
			wh.disabled = r.bool()
			wh.disabledReason, wh.disabledAt, wh.rateLimit = r.str(), r.int(), int(r.int())
			if prev := r.raw(); len(prev) > 0 {
				wh.prevSecret = append(eventlog.Sealed(nil), prev...)
			}
			wh.prevUntil, wh.disabledSeq = r.int(), r.uint()
			if n := r.len(); n > 0 {
				wh.skipped = make([]seqWindow, n)
				for j := range wh.skipped {
					wh.skipped[j] = seqWindow{after: r.uint(), through: r.uint()}
				}
			}
			wh.version = r.uint()
			t.webhooks[i] = wh
			s.webhooks[wh.id] = wh
		}
		r.days(&t.stats)
		r.seqs(&t.events)
		if r.err == nil {
			s.deriveStats(t)
		}
	}
	// Dashboard users: one block at the end (usersnapshot.go).
	if r.err == nil {
		s.decodeUsers(r)
	}
	if r.err == nil && len(r.b) != 0 {
		r.err = errors.New("trailing bytes")
	}
	// An id given twice would leave the first of its values unreachable by
	// id, and its entries in the trees naming the second.
	if r.err == nil && (len(s.sessions.ids) != s.sessions.len() || len(s.contacts.ids) != s.contacts.len()) {
		r.err = errors.New("a session or contact id is given twice")
	}
	if r.err != nil {
		return nil, fmt.Errorf("snapshot: %w", r.err)
	}
	return s, nil
}

// SaveSnapshot writes the state as the store's snapshot, replacing the one
// before, with one sync. It never holds the state locked for more than one
// step of snapshotStep objects, so reads and writes go on meanwhile; the
// snapshot is the state as it was when SaveSnapshot began.
func (p *Projections) SaveSnapshot() (uint64, error) { return p.saveSnapshot(snapshotStep, nil) }

// saveSnapshot is SaveSnapshot in steps of step objects, calling between,
// if set, at every step while the state is unlocked (tests change the
// state there).
func (p *Projections) saveSnapshot(step int, between func()) (uint64, error) {
	p.snapMu.Lock()
	defer p.snapMu.Unlock()
	// The snapshot goes into a table of its own, chunks and metadata,
	// that replaces the stored one whole (synced, paced) when it is all
	// written: through the WAL, it made the log's next fsync, which
	// readers of the state wait for, carry megabytes. The chunks are
	// written as the encoder fills them.
	pace := rate.NewLimiter(rate.Limit(snapshotWriteRate), snapshotChunk)
	r, err := p.log.Store().BeginReplace([]byte{eventlog.KeyspaceSnapshot}, func(n int) error { return pace.WaitN(context.Background(), n) })
	if err != nil {
		return 0, err
	}
	defer r.Abort() // after Commit, nothing
	meta := snapMeta{Version: snapshotVersion}
	sum := sha256.New()
	w := newSnapWriter(func(chunk []byte) error {
		sum.Write(chunk)
		if err := r.Put(snapChunkKey(meta.Slot, meta.Chunks), chunk); err != nil {
			return err
		}
		meta.Chunks++
		return nil
	})
	if meta.Seq, err = p.encodeInSteps(w, step, between); err != nil {
		return 0, err
	}
	if meta.Chain, _, err = p.log.HashAt(meta.Seq); err != nil {
		return 0, err
	}
	if w.emit(true); w.err != nil {
		return 0, w.err
	}
	sum.Sum(meta.Sum[:0])
	mb, err := msgpack.Marshal(&meta)
	if err != nil {
		return 0, err
	}
	if err := r.Put(snapMetaKey, mb); err != nil { // 'm' sorts after the chunks' 'c'
		return 0, err
	}
	if err := r.Commit(); err != nil {
		return 0, err
	}
	p.snapSize.Store(w.size)
	return meta.Seq, nil
}

// loadSnapshot returns the stored snapshot's state, or nil when there is
// none usable: missing, of another version, or damaged. why says which.
func loadSnapshot(store *eventlog.Store) (s *State, why string) {
	meta, data, why := readSnapshot(store)
	if why != "" {
		return nil, why
	}
	s, err := decodeSnapshot(data)
	if err != nil {
		return nil, err.Error()
	}
	if s.seq != meta.Seq {
		return nil, "snapshot seq does not match its metadata"
	}
	return s, ""
}

// noSnapshot is readSnapshot's why when none is stored.
const noSnapshot = "no snapshot"

// readSnapshot returns the stored snapshot's metadata and bytes, checked
// against its checksum, or why there is none usable.
func readSnapshot(store *eventlog.Store) (meta snapMeta, data []byte, why string) {
	mb, ok, err := store.Get(snapMetaKey)
	if err != nil || !ok {
		return meta, nil, noSnapshot
	}
	if msgpack.Unmarshal(mb, &meta) != nil {
		return meta, nil, "snapshot metadata is damaged"
	}
	if meta.Version != snapshotVersion {
		return meta, nil, fmt.Sprintf("snapshot is of version %d, this code reads %d", meta.Version, snapshotVersion)
	}
	// Every chunk but the last is snapshotChunk long: one allocation, where
	// growing by appends copied a million sessions' snapshot ~8 times over
	// (half of a start-up from a snapshot).
	if meta.Chunks < 1 || meta.Chunks > maxSnapshotChunks {
		return meta, nil, fmt.Sprintf("snapshot metadata names %d chunks", meta.Chunks)
	}
	data = make([]byte, 0, meta.Chunks*snapshotChunk)
	for i := 0; i < meta.Chunks; i++ {
		data, ok, err = store.AppendValue(data, snapChunkKey(meta.Slot, i))
		if err != nil || !ok {
			return meta, nil, fmt.Sprintf("snapshot chunk %d is missing", i)
		}
	}
	if sha256.Sum256(data) != meta.Sum {
		return meta, nil, "snapshot checksum does not match"
	}
	return meta, data, ""
}

// snapshotOnLog checks the stored snapshot (meta) against the log it was
// taken from: a log that ends before the snapshot's seq lost records that
// were durable (a snapshot is written only after them, in the same store),
// and one that holds another record at that seq than when the snapshot was
// taken was rewritten, or the snapshot comes from another data dir. Either
// is a *eventlog.VerifyError: the log is what is damaged, and replaying it
// instead of loading the snapshot would hide that.
func snapshotOnLog(log *eventlog.Log, meta snapMeta) error {
	head := log.DurableSeq()
	if meta.Seq > head {
		return &eventlog.VerifyError{Seq: head + 1, Reason: fmt.Sprintf(
			"missing: the log ends at seq %d, but the state's snapshot was taken at seq %d; records that were durable "+
				"are gone (deleted, or a damaged WAL or SST file); restore the data dir from a backup", head, meta.Seq)}
	}
	if meta.Chain == ([eventlog.HashSize]byte{}) {
		return nil // written before snapshots kept the hash
	}
	hash, _, err := log.HashAt(meta.Seq)
	if err != nil {
		return err
	}
	if hash != meta.Chain {
		return &eventlog.VerifyError{Seq: meta.Seq, Reason: fmt.Sprintf(
			"not the record the log held at this seq when the state's snapshot was taken (its hash is %x, the snapshot's "+
				"says %x): the log was rewritten, its chain computed again, or the snapshot comes from another data dir; "+
				"restore the data dir from a backup", hash, meta.Chain)}
	}
	return nil
}

// SnapshotOnLog is snapshotOnLog for the store's stored snapshot of this
// version, if any: what serve checks before it loads one, from the
// metadata alone.
func SnapshotOnLog(log *eventlog.Log) error {
	meta, ok := readSnapMeta(log.Store())
	if !ok {
		return nil
	}
	return snapshotOnLog(log, meta)
}

// readSnapMeta returns the stored snapshot's metadata, if it has some of
// this version.
func readSnapMeta(store *eventlog.Store) (meta snapMeta, ok bool) {
	mb, ok, err := store.Get(snapMetaKey)
	if err != nil || !ok || msgpack.Unmarshal(mb, &meta) != nil || meta.Version != snapshotVersion {
		return meta, false
	}
	return meta, true
}

// SnapshotMismatchError reports a stored snapshot that is not the state
// the log gives at its seq: it was altered (it checks only against its own
// checksum when loaded), and serve would load the altered state.
type SnapshotMismatchError struct{ Seq uint64 }

func (e *SnapshotMismatchError) Error() string {
	return fmt.Sprintf("the snapshot at seq %d is not the state the log gives at that seq: it was altered; "+
		"restore the data dir from a backup (or start from the log alone: remove the data dir's snapshot by importing an export of the log into a new data dir)", e.Seq)
}

// SnapshotCheck is what CheckSnapshot found.
type SnapshotCheck struct {
	Seq     uint64 // the stored snapshot's seq; 0 when there is none serve would load
	Ignored string // why a stored snapshot is not one serve would load ("" when none is stored)
}

// StoredSnapshotSeq returns the seq of the stored snapshot of this version,
// 0 when there is none, without reading the snapshot: what CheckSnapshot
// will replay, for a progress bar's total.
func StoredSnapshotSeq(log *eventlog.Log) uint64 {
	meta, _ := readSnapMeta(log.Store())
	return meta.Seq
}

// CheckSnapshot replays log up to the stored snapshot's seq into a new
// state and compares its encoding with the snapshot, byte for byte
// (encoding is deterministic: the same state gives the same bytes). A
// stored snapshot that serve would not load (of another version, damaged:
// serve then replays the log) is named in Ignored. It returns a
// *SnapshotMismatchError when the snapshot differs, and the log damage
// snapshotOnLog finds (the log lost records, or was rewritten behind the
// snapshot) as a *eventlog.VerifyError. It holds a second copy of the
// state while it runs. progress, if set, is called as the replay goes,
// with the seq replayed to and the snapshot's.
func CheckSnapshot(log *eventlog.Log, progress func(done, total uint64)) (SnapshotCheck, error) {
	return checkSnapshot(log, func() (snapMeta, string) {
		meta, _, why := readSnapshot(log.Store())
		return meta, why
	}, progress)
}

// CheckSnapshot is the package's CheckSnapshot on the running state's log:
// the stored snapshot is read while no snapshot is being saved. A save
// replaces the keyspace through Pebble's IngestAndExcise, and reads beside
// one (even through one Pebble snapshot of the store) found the metadata
// without its chunks, or neither, a few times in a hundred: log verify on
// a running server called a sound snapshot ignored, and left it unchecked.
func (p *Projections) CheckSnapshot(progress func(done, total uint64)) (SnapshotCheck, error) {
	return checkSnapshot(p.log, func() (snapMeta, string) {
		p.snapMu.Lock()
		defer p.snapMu.Unlock()
		meta, _, why := readSnapshot(p.log.Store())
		return meta, why
	}, progress)
}

func checkSnapshot(log *eventlog.Log, read func() (snapMeta, string), progress func(done, total uint64)) (SnapshotCheck, error) {
	// The stored bytes hash to meta.Sum: the replay's encoding is
	// compared with that.
	meta, why := read()
	if why == noSnapshot {
		return SnapshotCheck{}, nil
	}
	if why != "" {
		return SnapshotCheck{Ignored: why}, nil
	}
	check := SnapshotCheck{Seq: meta.Seq}
	if err := snapshotOnLog(log, meta); err != nil {
		return check, err
	}
	var report func(seq, head uint64)
	if progress != nil {
		report = func(seq, _ uint64) { progress(seq, meta.Seq) }
	}
	s, err := replayLogTo(log, nil, meta.Seq, report, nil)
	if err != nil {
		return check, err
	}
	b, err := s.encodeSnapshot()
	if err != nil {
		return check, err
	}
	if sha256.Sum256(b) != meta.Sum {
		return check, &SnapshotMismatchError{Seq: meta.Seq}
	}
	return check, nil
}

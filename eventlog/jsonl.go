package eventlog

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/oklog/ulid/v2"

	"demosvc/eventlog/strictjson"
)

// JSONRecord is a record as JSON: one line of `demosvc log` and of `demosvc
// log export`. Export adds the hash; `log` leaves it out and shows sealed
// values as "[sealed]".
type JSONRecord struct {
	Seq       uint64          `json:"seq"`
	ID        string          `json:"id"`
	Type      string          `json:"type"`
	Version   int             `json:"version"`
	Time      time.Time       `json:"time"`
	AccountID string          `json:"account_id"`
	Actor     string          `json:"actor"`
	Data      json.RawMessage `json:"data"`
	Hash      string          `json:"hash,omitempty"`
}

// ToJSON renders rec with its payload at its stored version. With export
// set the hash is included and sealed values keep their ciphertext;
// otherwise sealed values are replaced by "[sealed]".
func (r *Registry) ToJSON(rec *Record, export bool) (*JSONRecord, error) {
	payload, err := r.DecodeStored(rec)
	if err != nil {
		return nil, err
	}
	data, err := json.Marshal(payload)
	if err != nil {
		return nil, err
	}
	if export && replacedInvalidUTF8(data) {
		// JSON cannot carry the bytes: the line would not match its hash,
		// and an import of it would fail. Say so now. (A display shows
		// them as U+FFFD.)
		return nil, fmt.Errorf("record %d (%s): its payload holds text that is not valid UTF-8, which JSON cannot carry", rec.Seq, rec.Type)
	}
	out := &JSONRecord{
		Seq: rec.Seq, ID: rec.ID, Type: rec.Type, Version: rec.Version, Time: rec.Time.UTC(),
		AccountID: rec.Account, Actor: rec.Actor, Data: data,
	}
	if export {
		out.Hash = hex.EncodeToString(rec.Hash[:])
	} else if bytes.Contains(data, []byte(`{"$sealed":`)) {
		if out.Data, err = redactSealed(data); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// replacedInvalidUTF8 reports whether json.Marshal replaced bytes that are
// not UTF-8 in data: it writes each as the escape \ufffd, and never
// writes that escape otherwise (a real U+FFFD goes out as itself, and a
// backslash of the text as \\).
func replacedInvalidUTF8(data []byte) bool {
	for i := 0; ; {
		j := bytes.Index(data[i:], []byte(`\ufffd`))
		if j < 0 {
			return false
		}
		j += i
		slashes := 0
		for k := j - 1; k >= 0 && data[k] == '\\'; k-- {
			slashes++
		}
		if slashes%2 == 0 {
			return true
		}
		i = j + 1
	}
}

// redactSealed replaces every {"$sealed":…} object in data by "[sealed]".
func redactSealed(data []byte) ([]byte, error) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return json.Marshal(redactValue(v))
}

func redactValue(v any) any {
	switch t := v.(type) {
	case map[string]any:
		if _, ok := t["$sealed"]; ok && len(t) == 1 {
			return "[sealed]"
		}
		for k, e := range t {
			t[k] = redactValue(e)
		}
	case []any:
		for i, e := range t {
			t[i] = redactValue(e)
		}
	}
	return v
}

// Export writes every durable record from seq from on as JSON lines that
// Import takes back byte for byte.
func (l *Log) Export(w io.Writer, from uint64) (int, error) {
	return l.ExportProgress(w, from, nil)
}

// ExportProgress is Export telling progress, if not nil, how many records
// of how many it wrote: at the start, every few thousand and at the end.
// Everything written before a call has been flushed to w, so progress may
// write to w too. On an error, w holds the records before it as whole
// lines.
//
// It checks the chain as it goes: a record whose hash does not follow from
// the one before it (altered, or storage damage) ends the export before
// it with a *VerifyError, rather than being written with a hash that no
// import would take (and an exit 0 that said the copy was good).
func (l *Log) ExportProgress(w io.Writer, from uint64, progress Progress) (int, error) {
	bw := bufio.NewWriterSize(w, 64<<10)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	from = max(from, 1)
	head := l.DurableSeq()
	var total uint64
	if head >= from {
		total = head - from + 1
	}
	if progress != nil {
		progress(0, total) // the start, from which a rate is measured
	}
	n := 0
	prev, _, err := l.HashAt(from - 1) // none before seq 1: zero
	if err != nil {
		return 0, err
	}
	err = l.read(from, head, func(rec *Record, value []byte) error {
		if body, _, _ := splitValue(value); chainHash(prev, body) != rec.Hash {
			return &VerifyError{Seq: rec.Seq, Reason: "hash does not match the record and the previous hash: " +
				"the export ends before it (log verify names the damage)"}
		}
		prev = rec.Hash
		j, err := l.opts.Registry.ToJSON(rec, true)
		if err != nil {
			return err
		}
		n++
		if err := enc.Encode(j); err != nil {
			return err
		}
		if progress != nil && n%progressEvery == 0 {
			if err := bw.Flush(); err != nil {
				return err
			}
			progress(uint64(n), total)
		}
		return nil
	})
	// The buffer flushes when full, mid-line: what it holds completes
	// the last line, so that whatever w gets next (the admin socket's
	// error line) starts a line of its own.
	if ferr := bw.Flush(); err == nil {
		err = ferr
	}
	if err != nil {
		return n, err
	}
	if progress != nil {
		progress(uint64(n), total)
	}
	return n, nil
}

// ImportError names the input line that made Import refuse the whole input.
type ImportError struct {
	Line int
	Err  error
}

func (e *ImportError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }
func (e *ImportError) Unwrap() error { return e.Err }

// ErrNotEmpty reports an import into a log that already has records.
var ErrNotEmpty = errors.New("the log is not empty: import needs a new data dir")

// maxImportLine bounds one JSON line of an import.
const maxImportLine = 16 << 20

// importChunkBytes is how many bytes of records an import writes per
// batch, so that its memory does not grow with the input.
var importChunkBytes = 4 << 20

// ImportOptions configures Import.
type ImportOptions struct {
	// Check, if set, sees every record in order and refuses one the
	// service could not have written (the projections replay it).
	Check func(rec *Record) error
	// Progress, if set, is called with the number of records staged after
	// each chunk is written.
	Progress func(records uint64)
}

// ErrIncompleteImport reports a data dir whose import stopped before it
// finished (the process was killed, or the machine stopped).
var ErrIncompleteImport = errors.New("an import into this data dir did not finish")

// importMarkKey, while present, says the log keyspace holds an import in
// progress: a staging area that only the import's final commit turns into
// the log.
var importMarkKey = []byte{prefixMeta, 'i', 'm', 'p', 'o', 'r', 't'}

// importing reports whether an unfinished import left records behind.
func (s *Store) importing() (bool, error) {
	_, ok, err := s.Get(importMarkKey)
	return ok, err
}

// Import reads JSON lines (the export format) into the empty log of store,
// all or nothing. For hand-written fixtures, seq, id, version, actor and
// hash may be left out: seq continues the sequence, id is derived from the
// seq and time, version is the type's latest, actor is "cli" and the hash is
// computed. A given seq must continue the sequence and a given hash must be
// the correct one. No Log may be open on store.
//
// Records are written in chunks of a few MiB as they are read, so memory
// does not grow with the input. Until the last chunk commits, a mark in the
// store says the log is only staged: a refused line deletes what was
// staged, and a log left staged by a killed import does not open
// (ErrIncompleteImport) until an import runs again, which starts over.
func Import(store *Store, reg *Registry, r io.Reader, opts ImportOptions) (int, error) {
	staged, err := store.importing()
	if err != nil {
		return 0, err
	}
	if staged {
		if err := store.dropStagedImport(); err != nil {
			return 0, fmt.Errorf("removing the unfinished import: %w", err)
		}
	}
	empty, err := store.logEmpty()
	if err != nil {
		return 0, err
	}
	if !empty {
		return 0, ErrNotEmpty
	}
	if err := store.WriteSync([]Put{{Key: importMarkKey, Value: []byte{1}}}, nil, nil); err != nil {
		return 0, err
	}
	n, last, err := importLines(store, reg, r, opts)
	if err != nil {
		if derr := store.dropStagedImport(); derr != nil {
			return 0, errors.Join(err, fmt.Errorf("removing the refused import: %w", derr))
		}
		return 0, err
	}
	if n > 0 {
		if err := writeHeadMark(store.Dir(), headMark{Seq: n, Hash: hex.EncodeToString(last[:])}); err != nil {
			store.dropStagedImport()
			return 0, fmt.Errorf("recording the head mark: %w", err)
		}
	}
	// The one synced commit that turns the staged records into the log:
	// the WAL is sequential, so its fsync makes every earlier chunk durable.
	b := store.db.NewBatch()
	defer b.Close()
	if err := b.Delete(importMarkKey, nil); err != nil {
		return 0, err
	}
	if err := store.commitSync(b); err != nil {
		return 0, err
	}
	return int(n), nil
}

// dropStagedImport deletes the log keyspace and the import mark.
func (s *Store) dropStagedImport() error {
	b := s.db.NewBatch()
	defer b.Close()
	if err := b.DeleteRange([]byte{prefixLog}, []byte{prefixLog + 1}, nil); err != nil {
		return err
	}
	if err := b.Delete(importMarkKey, nil); err != nil {
		return err
	}
	return s.commitSync(b)
}

// importLines stages every record of r, a chunk per batch, and returns how
// many it staged and the last one's hash.
func importLines(store *Store, reg *Registry, r io.Reader, opts ImportOptions) (uint64, [HashSize]byte, error) {
	var prev [HashSize]byte
	batch := store.db.NewBatch()
	defer func() { batch.Close() }()
	flush := func() error {
		if err := batch.Commit(pebble.NoSync); err != nil {
			return err
		}
		batch.Close()
		batch = store.db.NewBatch()
		return nil
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxImportLine)
	seq := uint64(1)
	line := 0
	// Event ids are unique: receivers dedupe on them. Each id's 16 bytes
	// and seq are kept, some 40 B a record, a small part of what the
	// state of the imported log will hold in memory.
	ids := map[ulid.ULID]uint64{}
	hashed := false // a line so far had a hash
	for sc.Scan() {
		line++
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 {
			continue
		}
		rec, wantHash, err := parseImportLine(reg, text, seq)
		if err != nil {
			return 0, prev, &ImportError{Line: line, Err: err}
		}
		id := ulid.MustParseStrict(strings.TrimPrefix(rec.ID, "evt_")) // canonical: parseImportLine checked it or made it
		if first, dup := ids[id]; dup {
			return 0, prev, &ImportError{Line: line, Err: fmt.Errorf("id %s is already the id of seq %d: an event id names one event", rec.ID, first)}
		}
		ids[id] = seq
		val, err := encodeRecord(rec, prev)
		if err != nil {
			return 0, prev, &ImportError{Line: line, Err: err}
		}
		switch {
		case wantHash != "" && wantHash != hex.EncodeToString(rec.Hash[:]):
			return 0, prev, &ImportError{Line: line, Err: fmt.Errorf("hash %s does not match the record and the chain (computed %x)", wantHash, rec.Hash)}
		case wantHash != "":
			hashed = true
		case hashed:
			// Lines without hashes are for fixtures written by hand; in
			// an export every line has one, and a line that lost its
			// hash is one that could have been changed unchecked.
			return 0, prev, &ImportError{Line: line, Err: errors.New(`"hash" is missing, where the lines before have one: ` +
				`every line of an export has its hash (this one was removed, and the line could have been changed)`)}
		}
		if opts.Check != nil {
			if err := opts.Check(rec); err != nil {
				return 0, prev, &ImportError{Line: line, Err: err}
			}
		}
		if err := batch.Set(logKey(seq), val, nil); err != nil {
			return 0, prev, err
		}
		prev = rec.Hash
		if batch.Len() >= importChunkBytes {
			if err := flush(); err != nil {
				return 0, prev, err
			}
			if opts.Progress != nil {
				opts.Progress(seq)
			}
		}
		seq++
	}
	if err := sc.Err(); err != nil {
		return 0, prev, &ImportError{Line: line + 1, Err: err}
	}
	if err := flush(); err != nil {
		return 0, prev, err
	}
	return seq - 1, prev, nil
}

func parseImportLine(reg *Registry, text []byte, seq uint64) (*Record, string, error) {
	var j struct {
		Seq       *uint64         `json:"seq"`
		ID        string          `json:"id"`
		Type      string          `json:"type"`
		Version   int             `json:"version"`
		Time      *time.Time      `json:"time"`
		AccountID *string         `json:"account_id"`
		Actor     *string         `json:"actor"`
		Data      json.RawMessage `json:"data"`
		Hash      string          `json:"hash"`
	}
	if err := strictjson.DecodeObject(text, &j); err != nil {
		return nil, "", fmt.Errorf("malformed record: %v", err)
	}
	switch {
	case j.Seq != nil && *j.Seq != seq:
		return nil, "", fmt.Errorf("seq %d does not continue the log (want %d)", *j.Seq, seq)
	case j.Type == "":
		return nil, "", errors.New(`"type" is required`)
	case !reg.Known(j.Type):
		return nil, "", fmt.Errorf("unknown event type %q", j.Type)
	case j.Time == nil:
		return nil, "", errors.New(`"time" is required`)
	case j.AccountID == nil:
		return nil, "", errors.New(`"account_id" is required`)
	case len(j.Data) == 0 || string(j.Data) == "null":
		return nil, "", errors.New(`"data" is required`)
	case j.ID != "" && !canonicalEventID(j.ID):
		return nil, "", fmt.Errorf("id %q must be evt_ and a ULID in lower case, as the service writes them", j.ID)
	case j.Time.UTC().Year() < 1970 || j.Time.UTC().Year() > 9999:
		return nil, "", fmt.Errorf("time %s is not between the years 1970 and 9999", j.Time.UTC().Format(time.RFC3339Nano))
	}
	if j.Version == 0 {
		j.Version = reg.Latest(j.Type)
	}
	actor := "cli" // left out of a hand-written line; an export always has it
	if j.Actor != nil {
		actor = *j.Actor
	}
	payload, err := reg.PayloadFromJSON(j.Type, j.Version, j.Data)
	if err != nil {
		return nil, "", err
	}
	t := j.Time.UTC()
	if j.ID == "" {
		j.ID = derivedEventID(seq, t)
	}
	rec := &Record{Seq: seq, ID: j.ID, Type: j.Type, Version: j.Version, Time: t, Account: *j.AccountID, Actor: actor, Payload: payload}
	return rec, strings.ToLower(j.Hash), nil
}

// canonicalEventID reports whether id is an event id as the service
// writes it: evt_ and a ULID in lower case. Receivers dedupe on it and
// send it as a header, so an import takes nothing else.
func canonicalEventID(id string) bool {
	rest, ok := strings.CutPrefix(id, "evt_")
	if !ok || len(rest) != ulid.EncodedSize || strings.ToLower(rest) != rest {
		return false
	}
	_, err := ulid.ParseStrict(rest)
	return err == nil
}

// derivedEventID gives a hand-written record without an id a stable one:
// the ULID of its time with entropy derived from its seq.
func derivedEventID(seq uint64, t time.Time) string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], seq)
	sum := sha256.Sum256(append([]byte("demosvc import "), b[:]...))
	var id ulid.ULID
	_ = id.SetTime(ulid.Timestamp(t))
	_ = id.SetEntropy(sum[:10])
	return FormatID("evt_", id)
}

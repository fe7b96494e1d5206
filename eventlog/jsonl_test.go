package eventlog

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
)

// steppingClock returns a clock that starts at testTime and moves on by a
// step with a nanosecond part at each reading, so exported times carry
// fractional seconds and differ from record to record.
func steppingClock() Clock {
	var n atomic.Int64
	return func() time.Time {
		return testTime.Add(time.Duration(n.Add(1)) * (1500*time.Millisecond + 7*time.Nanosecond))
	}
}

// exportAll exports the whole log of h and checks that it wrote want records.
func exportAll(t *testing.T, h *harness, want int) []byte {
	t.Helper()
	var buf bytes.Buffer
	n, err := h.log.Export(&buf, 1)
	if err != nil {
		t.Fatalf("Export: %v", err)
	}
	if n != want {
		t.Fatalf("Export wrote %d records, want %d", n, want)
	}
	if got := bytes.Count(buf.Bytes(), []byte("\n")); got != want {
		t.Fatalf("Export wrote %d lines, want %d:\n%s", got, want, buf.Bytes())
	}
	return buf.Bytes()
}

// importDir imports input into the store of dir (created if missing) with
// no log open on it, and closes the store again.
func importDir(t *testing.T, dir string, input []byte) (int, error) {
	t.Helper()
	store, err := OpenStore(dir, StoreOptions{Create: true})
	if err != nil {
		t.Fatalf("OpenStore: %v", err)
	}
	defer func() {
		if err := store.Close(); err != nil {
			t.Errorf("closing the store: %v", err)
		}
	}()
	return Import(store, testRegistry(), bytes.NewReader(input), ImportOptions{})
}

// mustImport imports input into a new data dir and opens a harness on it.
func mustImport(t *testing.T, input []byte, want int) *harness {
	t.Helper()
	dir := t.TempDir()
	n, err := importDir(t, dir, input)
	if err != nil {
		t.Fatalf("Import: %v", err)
	}
	if n != want {
		t.Fatalf("Import took %d records, want %d", n, want)
	}
	h := openHarness(t, dir)
	if got := h.log.DurableSeq(); got != uint64(want) {
		t.Fatalf("DurableSeq after import = %d, want %d", got, want)
	}
	if got, err := h.log.Verify(); err != nil || got != uint64(want) {
		t.Fatalf("Verify after import = %d, %v; want %d, nil", got, err, want)
	}
	return h
}

// assertLogEmpty reopens dir and checks that its log holds no record.
func assertLogEmpty(t *testing.T, dir string) {
	t.Helper()
	store, err := OpenStore(dir, StoreOptions{})
	if err != nil {
		t.Fatalf("OpenStore: %v", err)
	}
	defer store.Close()
	empty, err := store.logEmpty()
	if err != nil {
		t.Fatal(err)
	}
	if !empty {
		t.Error("a refused import left records in the log")
	}
}

// fillVariedLog appends records of both types, with several accounts and
// actors, awkward strings and a real sealed secret, to a fresh log whose
// clock moves between commits. It returns the log and the plaintext sealed.
func fillVariedLog(t *testing.T) (*harness, *Sealer, []Record) {
	t.Helper()
	h := openHarness(t, "")
	// Reopen the log with a clock that moves, so that times differ.
	h.log.Close()
	var err error
	h.log, err = OpenLog(h.store, Options{Registry: testRegistry(), IDs: NewSeededIDs(steppingClock(), 3)})
	if err != nil {
		t.Fatal(err)
	}
	sealer := newTestSealer(t, testKey(9))
	secret, err := sealer.Seal([]byte("postgres://u:hunter2@db/prod"))
	if err != nil {
		t.Fatal(err)
	}
	batches := [][]Event{
		{{Account: "acc_1", Actor: "cli", Payload: note{Text: "hello", N: 1}}},
		{
			{Account: "acc_1", Actor: "key_01", Payload: &note{Text: `quotes " \ and <html> & "tabs"	`, N: -7}},
			{Account: "acc_2", Actor: "key_02", Payload: note{Text: "unicode: żółw 🐢 \u2028 line\nbreak", N: 1 << 40}},
		},
		{{Account: "acc_2", Actor: "key_02", Payload: secretNote{Name: "db", Secret: secret}}},
		{{Account: "", Actor: "cli", Payload: note{}}},
		{{Account: "acc_3", Actor: "cli", Payload: secretNote{Name: "empty-but-sealed", Secret: Sealed{}}}},
	}
	var recs []Record
	for _, evs := range batches {
		got, err := appendTx(h.log, evs)
		if err != nil {
			t.Fatalf("Append: %v", err)
		}
		recs = append(recs, got...)
	}
	return h, sealer, recs
}

func TestExportImportExportIsByteIdentical(t *testing.T) {
	src, sealer, recs := fillVariedLog(t)
	first := exportAll(t, src, len(recs))
	if !bytes.Contains(first, []byte(`{"$sealed":"`)) {
		t.Fatalf("the export carries no sealed value:\n%s", first)
	}
	if bytes.Contains(first, []byte("hunter2")) {
		t.Fatalf("the export carries a secret in plaintext:\n%s", first)
	}

	dst := mustImport(t, first, len(recs))
	second := exportAll(t, dst, len(recs))
	if !bytes.Equal(first, second) {
		t.Fatalf("export after import differs:\nfirst:\n%s\nsecond:\n%s", first, second)
	}

	t.Run("records keep ids times and hashes", func(t *testing.T) {
		got := dst.all()
		for i, r := range got {
			w := recs[i]
			if r.Seq != w.Seq || r.ID != w.ID || !r.Time.Equal(w.Time) || r.Account != w.Account || r.Actor != w.Actor || r.Hash != w.Hash {
				t.Errorf("record %d after import = %+v, want %+v", i+1, r, w)
			}
			if !bytes.Equal(r.Payload, w.Payload) {
				t.Errorf("record %d payload after import = %x, want %x", i+1, r.Payload, w.Payload)
			}
		}
	})

	t.Run("the imported secret still opens", func(t *testing.T) {
		var opened bool
		err := dst.log.Read(1, 0, func(r *Record) error {
			v, err := dst.log.Registry().Decode(r)
			if err != nil {
				return err
			}
			sn, ok := v.(*secretNote)
			if !ok || sn.Name != "db" {
				return nil
			}
			plain, err := sealer.Open(sn.Secret)
			if err != nil {
				return fmt.Errorf("seq %d: %w", r.Seq, err)
			}
			if string(plain) != "postgres://u:hunter2@db/prod" {
				return fmt.Errorf("seq %d: secret opens to %q", r.Seq, plain)
			}
			opened = true
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if !opened {
			t.Error("no sealed secret found after import")
		}
	})

	t.Run("appending after import continues the chain", func(t *testing.T) {
		more := dst.append(1)
		if more[0].Seq != uint64(len(recs)+1) {
			t.Errorf("seq after import = %d, want %d", more[0].Seq, len(recs)+1)
		}
		if n, err := dst.log.Verify(); err != nil || n != uint64(len(recs)+1) {
			t.Errorf("Verify = %d, %v", n, err)
		}
	})
}

// fixture is a hand-written import: no seq, id, version, actor or hash. It
// has a blank line, a time with an offset and one with nanoseconds.
const fixture = `{"type":"note","time":"2026-11-21T12:00:00Z","account_id":"acc_1","data":{"text":"first","n":1}}

{"type":"note","time":"2026-11-21T14:00:00.123456789+02:00","account_id":"acc_1","data":{"text":"second"}}
{"type":"secret.note","time":"2026-11-21T12:00:01Z","account_id":"acc_2","data":{"name":"db","secret":{"$sealed":"AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="}}}
  {"type":"note","time":"2026-11-21T12:00:01Z","account_id":"acc_2","actor":"key_9","version":1,"data":{"n":4,"text":"given actor and version"}}
`

func TestHandWrittenFixtureImports(t *testing.T) {
	a := mustImport(t, []byte(fixture), 4)
	b := mustImport(t, []byte(fixture), 4)
	exportA := exportAll(t, a, 4)
	exportB := exportAll(t, b, 4)
	if !bytes.Equal(exportA, exportB) {
		t.Fatalf("two imports of one fixture differ:\n%s\n%s", exportA, exportB)
	}

	recs := a.all()
	t.Run("defaults are filled in", func(t *testing.T) {
		wantActors := []string{"cli", "cli", "cli", "key_9"}
		for i, r := range recs {
			if r.Seq != uint64(i+1) {
				t.Errorf("record %d: seq %d", i+1, r.Seq)
			}
			if r.Version != 1 {
				t.Errorf("record %d: version %d, want 1 (the latest)", i+1, r.Version)
			}
			if r.Actor != wantActors[i] {
				t.Errorf("record %d: actor %q, want %q", i+1, r.Actor, wantActors[i])
			}
			if r.Time.Location() != time.UTC {
				t.Errorf("record %d: time %v is not UTC", i+1, r.Time)
			}
		}
		want := time.Date(2026, 11, 21, 12, 0, 0, 123456789, time.UTC)
		if !recs[1].Time.Equal(want) || recs[1].Time.Nanosecond() != 123456789 {
			t.Errorf("record 2: time %v, want %v", recs[1].Time, want)
		}
	})

	t.Run("ids are derived from seq and time", func(t *testing.T) {
		seen := map[string]bool{}
		for i, r := range recs {
			if !strings.HasPrefix(r.ID, "evt_") || len(r.ID) != len("evt_")+26 || r.ID != strings.ToLower(r.ID) {
				t.Fatalf("record %d: id %q is not evt_ + 26 lowercase characters", i+1, r.ID)
			}
			id, err := ulid.ParseStrict(strings.ToUpper(r.ID[4:]))
			if err != nil {
				t.Fatalf("record %d: id %q: %v", i+1, r.ID, err)
			}
			if got := ulid.Time(id.Time()); !got.Equal(r.Time.Truncate(time.Millisecond)) {
				t.Errorf("record %d: id time %v, want the record's time %v", i+1, got, r.Time)
			}
			if seen[r.ID] {
				t.Errorf("record %d: id %q given twice", i+1, r.ID)
			}
			seen[r.ID] = true
		}
		// Records 3 and 4 share a time: only the seq tells them apart.
		if recs[2].ID[4:14] != recs[3].ID[4:14] {
			t.Errorf("records with one time got different time parts: %s %s", recs[2].ID, recs[3].ID)
		}
	})

	t.Run("payloads decode", func(t *testing.T) {
		v, err := a.log.Registry().Decode(&recs[1])
		if err != nil {
			t.Fatal(err)
		}
		if n := v.(*note); n.Text != "second" || n.N != 0 {
			t.Errorf("record 2 payload = %+v", n)
		}
		v, err = a.log.Registry().Decode(&recs[2])
		if err != nil {
			t.Fatal(err)
		}
		want, _ := base64.StdEncoding.DecodeString("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=")
		if sn := v.(*secretNote); sn.Name != "db" || !bytes.Equal(sn.Secret, want) {
			t.Errorf("record 3 payload = %+v", sn)
		}
	})

	t.Run("the export of an import imports to itself", func(t *testing.T) {
		c := mustImport(t, exportA, 4)
		if exportC := exportAll(t, c, 4); !bytes.Equal(exportA, exportC) {
			t.Errorf("re-importing the export changed it:\n%s\n%s", exportA, exportC)
		}
	})
}

func TestImportRefusesABadLineAndImportsNothing(t *testing.T) {
	// A valid export of three records, to corrupt line by line.
	src, _, _ := fillVariedLog(t)
	var buf bytes.Buffer
	if _, err := src.log.Export(&buf, 1); err != nil {
		t.Fatal(err)
	}
	valid := strings.SplitAfter(strings.TrimSuffix(buf.String(), "\n"), "\n")[:3]

	// edit replaces line 2 of the valid export by what f makes of it.
	edit := func(f func(rec map[string]any)) string {
		var rec map[string]any
		if err := json.Unmarshal([]byte(valid[1]), &rec); err != nil {
			t.Fatal(err)
		}
		f(rec)
		b, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		return valid[0] + string(b) + "\n" + valid[2]
	}
	flipHex := func(h string) string {
		b, _ := hex.DecodeString(h)
		b[len(b)-1] ^= 1
		return hex.EncodeToString(b)
	}
	good := `{"type":"note","time":"2026-11-21T12:00:00Z","account_id":"acc_1","data":{"text":"ok"}}` + "\n"
	var first struct{ ID string }
	if err := json.Unmarshal([]byte(valid[0]), &first); err != nil || first.ID == "" {
		t.Fatalf("the export's first line %s (%v)", valid[0], err)
	}
	firstID := first.ID

	for _, tc := range []struct {
		name    string
		input   string
		line    int
		errPart string // the error must say why
	}{
		{"wrong hash", edit(func(r map[string]any) { r["hash"] = flipHex(r["hash"].(string)) }), 2, "does not match"},
		{"hash of an edited record", edit(func(r map[string]any) { r["account_id"] = "acc_other" }), 2, "does not match"},
		{"a hash left out once earlier lines had one", edit(func(r map[string]any) { delete(r, "hash"); r["actor"] = "key_other" }), 2, `"hash" is missing, where the lines before have one`},
		{"bad JSON", good + `{"type":"note","time":` + "\n", 2, "malformed"},
		{"two JSON values on one line", good + strings.TrimSpace(good) + " " + good, 2, "data after the JSON object"},
		{"unknown field", edit(func(r map[string]any) { r["colour"] = "red" }), 2, "colour"},
		{"unknown type", good + `{"type":"nope","time":"2026-11-21T12:00:00Z","account_id":"a","data":{}}` + "\n", 2, "unknown event type"},
		{"unknown version", good + `{"type":"note","version":2,"time":"2026-11-21T12:00:00Z","account_id":"a","data":{}}` + "\n", 2, "no version 2"},
		{"missing type", good + `{"time":"2026-11-21T12:00:00Z","account_id":"a","data":{}}` + "\n", 2, `"type" is required`},
		{"missing time", edit(func(r map[string]any) { delete(r, "time") }), 2, `"time" is required`},
		{"malformed time", good + `{"type":"note","time":"yesterday","account_id":"a","data":{}}` + "\n", 2, "malformed"},
		{"missing account_id", good + `{"type":"note","time":"2026-11-21T12:00:00Z","data":{}}` + "\n", 2, `"account_id" is required`},
		{"missing data", good + `{"type":"note","time":"2026-11-21T12:00:00Z","account_id":"a"}` + "\n", 2, `"data" is required`},
		{"null data", good + `{"type":"note","time":"2026-11-21T12:00:00Z","account_id":"a","data":null}` + "\n", 2, `"data" is required`},
		{"data with an unknown field", good + `{"type":"note","time":"2026-11-21T12:00:00Z","account_id":"a","data":{"text":"x","bogus":1}}` + "\n", 2, "bogus"},
		{"data of the wrong shape", good + `{"type":"note","time":"2026-11-21T12:00:00Z","account_id":"a","data":{"n":"seven"}}` + "\n", 2, "data of note v1"},
		{"plaintext secret", good + `{"type":"secret.note","time":"2026-11-21T12:00:00Z","account_id":"a","data":{"name":"db","secret":"hunter2"}}` + "\n", 2, "$sealed"},
		{"seq that skips", edit(func(r map[string]any) { r["seq"] = 3 }), 2, "does not continue"},
		{"seq that repeats", edit(func(r map[string]any) { r["seq"] = 1 }), 2, "does not continue"},
		{"seq that does not start at one", `{"seq":2,"type":"note","time":"2026-11-21T12:00:00Z","account_id":"a","data":{}}` + "\n", 1, "does not continue"},
		{"id without evt_", edit(func(r map[string]any) { r["id"] = "ord_01jd0000000000000000000000" }), 2, "evt_"},
		{"id that is not a ULID", edit(func(r map[string]any) { r["id"] = "evt_bad\r\nid" }), 2, "a ULID in lower case"},
		{"id in upper case", edit(func(r map[string]any) { r["id"] = "evt_01JD0000000000000000000000" }), 2, "a ULID in lower case"},
		{"id too long", edit(func(r map[string]any) { r["id"] = "evt_01jd00000000000000000000000" }), 2, "a ULID in lower case"},
		{"id of an earlier record", edit(func(r map[string]any) { delete(r, "hash"); r["id"] = firstID }), 2, "already the id of seq 1"},
		{"id of an earlier record made for it", good + `{"id":"` + derivedEventID(1, time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)) + `","type":"note","time":"2026-11-21T12:00:00Z","account_id":"a","data":{}}` + "\n", 2, "already the id of seq 1"},
		{"time before 1970", good + `{"type":"note","time":"1969-12-31T23:59:59Z","account_id":"a","data":{}}` + "\n", 2, "not between the years 1970 and 9999"},
		{"time of year 0 by its offset", good + `{"type":"note","time":"0000-01-01T00:00:00+01:00","account_id":"a","data":{}}` + "\n", 2, "not between the years 1970 and 9999"},
		{"line numbers count blank lines", good + "\n   \n" + `{"type":"nope","time":"2026-11-21T12:00:00Z","account_id":"a","data":{}}` + "\n", 4, "unknown event type"},
		{"line too long", good + `{"type":"note","time":"2026-11-21T12:00:00Z","account_id":"a","data":{"text":"` + strings.Repeat("x", maxImportLine) + `"}}` + "\n", 2, "too long"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			n, err := importDir(t, dir, []byte(tc.input))
			var ie *ImportError
			if !errors.As(err, &ie) {
				t.Fatalf("Import = %d, %v; want an *ImportError", n, err)
			}
			if ie.Line != tc.line {
				t.Errorf("ImportError names line %d, want %d (%v)", ie.Line, tc.line, err)
			}
			if !strings.Contains(err.Error(), fmt.Sprintf("line %d: ", tc.line)) {
				t.Errorf("error %q does not name line %d", err, tc.line)
			}
			if !strings.Contains(err.Error(), tc.errPart) {
				t.Errorf("error %q does not say %q", err, tc.errPart)
			}
			if n != 0 {
				t.Errorf("Import reported %d records imported", n)
			}
			assertLogEmpty(t, dir)
			// The refusal left the data dir as new: a good import still works.
			if n, err := importDir(t, dir, []byte(good)); err != nil || n != 1 {
				t.Errorf("a valid import after the refusal = %d, %v; want 1, nil", n, err)
			}
		})
	}
}

func TestImportCheckRefusalNamesTheLineAndImportsNothing(t *testing.T) {
	errNoAcc3 := errors.New("account acc_3 does not exist")
	var seen []uint64
	check := func(rec *Record) error {
		seen = append(seen, rec.Seq)
		if rec.Account == "acc_3" {
			return errNoAcc3
		}
		return nil
	}
	input := fixture + `{"type":"note","time":"2026-11-21T12:00:02Z","account_id":"acc_3","data":{"text":"refused"}}` + "\n"
	dir := t.TempDir()
	store, err := OpenStore(dir, StoreOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	n, err := Import(store, testRegistry(), strings.NewReader(input), ImportOptions{Check: check})
	if cerr := store.Close(); cerr != nil {
		t.Fatal(cerr)
	}
	var ie *ImportError
	if !errors.As(err, &ie) || ie.Line != 6 || !errors.Is(err, errNoAcc3) {
		t.Fatalf("Import = %d, %v; want an *ImportError at line 6 wrapping the check's error", n, err)
	}
	if fmt.Sprint(seen) != "[1 2 3 4 5]" {
		t.Errorf("check saw seqs %v, want [1 2 3 4 5] in order", seen)
	}
	assertLogEmpty(t, dir)
}

func TestImportIntoANonEmptyLogIsRefused(t *testing.T) {
	h := openHarness(t, "")
	before := h.append(2)
	h.close()
	n, err := importDir(t, h.dir, []byte(fixture))
	if !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("Import into a log of 2 records = %d, %v; want ErrNotEmpty", n, err)
	}
	h = openHarness(t, h.dir)
	after := h.all()
	if len(after) != 2 || after[1].Hash != before[1].Hash {
		t.Errorf("the refused import changed the log: %d records", len(after))
	}
}

func TestEmptyImportIsAnEmptyLog(t *testing.T) {
	dir := t.TempDir()
	n, err := importDir(t, dir, []byte("\n  \n"))
	if err != nil || n != 0 {
		t.Fatalf("Import of blank lines = %d, %v; want 0, nil", n, err)
	}
	assertLogEmpty(t, dir)
}

func TestToJSON(t *testing.T) {
	h, _, recs := fillVariedLog(t)
	var rec *Record
	for i := range recs {
		if recs[i].Type == "secret.note" && len(recs[i].Payload) > 40 {
			rec = &recs[i]
		}
	}
	if rec == nil {
		t.Fatal("no record with a sealed secret")
	}
	v, err := h.log.Registry().DecodeStored(rec)
	if err != nil {
		t.Fatal(err)
	}
	ciphertext := base64.StdEncoding.EncodeToString(v.(*secretNote).Secret)

	t.Run("display hides the sealed value and the hash", func(t *testing.T) {
		j, err := h.log.Registry().ToJSON(rec, false)
		if err != nil {
			t.Fatal(err)
		}
		line, err := json.Marshal(j)
		if err != nil {
			t.Fatal(err)
		}
		if want := `{"name":"db","secret":"[sealed]"}`; string(j.Data) != want {
			t.Errorf("data = %s, want %s", j.Data, want)
		}
		for _, leak := range []string{ciphertext, "$sealed", "hunter2", hex.EncodeToString(rec.Hash[:])} {
			if strings.Contains(string(line), leak) {
				t.Errorf("display line %s shows %q", line, leak)
			}
		}
		if strings.Contains(string(line), `"hash"`) {
			t.Errorf("display line %s has a hash field", line)
		}
	})

	t.Run("export keeps the sealed value and adds the hash", func(t *testing.T) {
		j, err := h.log.Registry().ToJSON(rec, true)
		if err != nil {
			t.Fatal(err)
		}
		if want := `{"name":"db","secret":{"$sealed":"` + ciphertext + `"}}`; string(j.Data) != want {
			t.Errorf("data = %s, want %s", j.Data, want)
		}
		if want := hex.EncodeToString(rec.Hash[:]); j.Hash != want {
			t.Errorf("hash = %q, want %q", j.Hash, want)
		}
		if j.Seq != rec.Seq || j.ID != rec.ID || j.Type != "secret.note" || j.Version != 1 || !j.Time.Equal(rec.Time) || j.AccountID != rec.Account || j.Actor != rec.Actor {
			t.Errorf("ToJSON = %+v, want the fields of %+v", j, rec)
		}
	})

	t.Run("display leaves records without secrets alone", func(t *testing.T) {
		j, err := h.log.Registry().ToJSON(&recs[0], false)
		if err != nil {
			t.Fatal(err)
		}
		if want := `{"text":"hello","n":1}`; string(j.Data) != want {
			t.Errorf("data = %s, want %s", j.Data, want)
		}
	})
}

// vault holds sealed values at several depths.
type vault struct {
	Label string            `json:"label"`
	Keys  []Sealed          `json:"keys"`
	ByEnv map[string]Sealed `json:"by_env"`
	Inner struct {
		Token Sealed `json:"token"`
		Count int    `json:"count"`
	} `json:"inner"`
}

func TestToJSONHidesSealedValuesAtAnyDepth(t *testing.T) {
	reg := NewRegistry()
	Register[vault](reg, "vault", 1)
	var v vault
	v.Label = `{"$sealed":"not really"}` // a string, not a sealed value
	v.Keys = []Sealed{{1, 2, 3}, {4, 5, 6}}
	v.ByEnv = map[string]Sealed{"prod": {7, 8, 9}}
	v.Inner.Token = Sealed{10, 11, 12}
	v.Inner.Count = 12345678901
	name, version, payload, err := reg.Encode(v)
	if err != nil {
		t.Fatal(err)
	}
	rec := &Record{Seq: 1, ID: "evt_x", Type: name, Version: version, Time: testTime, Payload: payload}
	j, err := reg.ToJSON(rec, false)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"by_env":{"prod":"[sealed]"},"inner":{"count":12345678901,"token":"[sealed]"},"keys":["[sealed]","[sealed]"],"label":"{\"$sealed\":\"not really\"}"}`
	if string(j.Data) != want {
		t.Errorf("data = %s\nwant   %s", j.Data, want)
	}
}

func TestEmptyActorAndTrailingBracketsRoundTrip(t *testing.T) {
	h := openHarness(t, "")
	if _, err := appendTx(h.log, []Event{{Account: "acc_1", Payload: note{N: 1}}}); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := h.log.Export(&buf, 0); err != nil {
		t.Fatal(err)
	}
	dst := openHarness(t, "")
	dst.close()
	store, err := OpenStore(dst.dir, StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if n, err := Import(store, testRegistry(), bytes.NewReader(buf.Bytes()), ImportOptions{}); err != nil || n != 1 {
		t.Fatalf("re-import of a record with an empty actor = %d, %v", n, err)
	}
	bad := bytes.TrimSpace(buf.Bytes())
	for _, suffix := range []string{"}", "]"} {
		other := t.TempDir()
		s2, err := OpenStore(other, StoreOptions{Create: true})
		if err != nil {
			t.Fatal(err)
		}
		_, err = Import(s2, testRegistry(), bytes.NewReader(append(append([]byte(nil), bad...), suffix...)), ImportOptions{})
		s2.Close()
		if err == nil {
			t.Errorf("a line ending in an extra %q was imported", suffix)
		}
	}
}

// TestToJSONRefusesTextJSONCannotCarry: a payload string that is not
// UTF-8 would reach an export as U+FFFD, a line its hash does not match;
// an export says so instead (a display shows U+FFFD), while U+FFFD itself
// and text that reads like the escape go out unchanged.
func TestToJSONRefusesTextJSONCannotCarry(t *testing.T) {
	reg := testRegistry()
	for _, tc := range []struct {
		text string
		ok   bool
	}{
		{"hi \xff there", false},
		{`a backslash then \` + "\xfe", false},
		{"hi \ufffd there", true},
		{`hi \ufffd there`, true},
		{`hi \\ufffd there`, true},
	} {
		name, version, payload, err := reg.Encode(note{Text: tc.text, N: 1})
		if err != nil {
			t.Fatal(err)
		}
		rec := &Record{Seq: 7, ID: "evt_x", Type: name, Version: version, Time: testTime, Payload: payload}
		for _, export := range []bool{true, false} {
			j, err := reg.ToJSON(rec, export)
			if tc.ok && err != nil {
				t.Errorf("ToJSON(%q, export %v): %v", tc.text, export, err)
			}
			if !tc.ok && !export && (err != nil || !strings.Contains(string(j.Data), `\ufffd`)) {
				t.Errorf("display of %q = %+v, %v; want it shown with U+FFFD", tc.text, j, err)
			}
			if !tc.ok && export && (err == nil || !strings.Contains(err.Error(), "record 7 (note)") || !strings.Contains(err.Error(), "not valid UTF-8")) {
				t.Errorf("ToJSON(%q, export %v) = %+v, %v; want an error naming record 7 and the bad UTF-8", tc.text, export, j, err)
			}
		}
	}
}

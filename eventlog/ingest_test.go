package eventlog

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// replace makes puts what prefix holds through one Replacement.
func replace(s *Store, prefix []byte, puts []Put, pace func(n int) error) error {
	r, err := s.BeginReplace(prefix, pace)
	if err != nil {
		return err
	}
	for _, p := range puts {
		if err := r.Put(p.Key, p.Value); err != nil {
			return err
		}
	}
	return r.Commit()
}

// TestReplace: a Replacement's puts become what its prefix holds, readable
// whole, paced value by value, while every other key under the prefix is
// gone and keys beside it stay; keys out of order, outside the prefix or
// in the log's keyspace are refused and change nothing; a failed write of
// the table or an Abort changes nothing and leaves no file behind; Put
// copies its key and value.
func TestReplace(t *testing.T) {
	var failWrites atomic.Bool
	fs := errorfs.Wrap(vfs.Default, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if failWrites.Load() && op.Kind == errorfs.OpFileWrite && strings.HasSuffix(op.Path, ingestFile) {
			return errors.New("injected write error")
		}
		return nil
	}))
	dir := t.TempDir()
	s, err := OpenStore(dir, StoreOptions{Create: true, FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	prefix := []byte("s\x00")
	beside := []Put{{Key: []byte("s\x01a"), Value: []byte("beside")}, {Key: []byte("ia"), Value: []byte("elsewhere")}}
	if err := s.WriteSync(beside, nil, nil); err != nil {
		t.Fatal(err)
	}
	holds := func(want ...Put) {
		t.Helper()
		var got []Put
		if err := s.Scan([]byte("s"), func(k, v []byte) error {
			if bytes.HasPrefix(k, prefix) {
				got = append(got, Put{Key: append([]byte(nil), k...), Value: append([]byte(nil), v...)})
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("prefix holds %q, want %q", got, want)
		}
		for i := range got {
			if !bytes.Equal(got[i].Key, want[i].Key) || !bytes.Equal(got[i].Value, want[i].Value) {
				t.Fatalf("prefix holds %q, want %q", got, want)
			}
		}
		for _, p := range beside {
			if v, ok, err := s.Get(p.Key); err != nil || !ok || !bytes.Equal(v, p.Value) {
				t.Fatalf("Get(%q) beside the prefix = %q, %v, %v", p.Key, v, ok, err)
			}
		}
	}

	first := []Put{{Key: []byte("s\x00a"), Value: []byte("one")}, {Key: []byte("s\x00b"), Value: []byte("two")}}
	var paced []int
	if err := replace(s, prefix, first, func(n int) error { paced = append(paced, n); return nil }); err != nil {
		t.Fatal(err)
	}
	holds(first...)
	if len(paced) != 2 || paced[0] != 3 || paced[1] != 3 {
		t.Errorf("paced %v, want [3 3]", paced)
	}
	second := []Put{{Key: []byte("s\x00b"), Value: []byte("deux")}, {Key: []byte("s\x00c"), Value: []byte("trois")}}
	if err := replace(s, prefix, second, nil); err != nil {
		t.Fatal(err)
	}
	holds(second...)

	for name, bad := range map[string][]Put{
		"out of order":   {{Key: []byte("s\x00d")}, {Key: []byte("s\x00c")}},
		"outside prefix": {{Key: []byte("s\x01d")}},
		"nothing":        nil,
	} {
		if err := replace(s, prefix, bad, nil); err == nil {
			t.Errorf("%s: Replace accepted %q", name, bad)
		}
		holds(second...)
	}
	if err := replace(s, []byte{prefixLog}, []Put{{Key: logKey(1)}}, nil); err == nil {
		t.Error("Replace accepted the log's keyspace")
	}

	failWrites.Store(true)
	if err := replace(s, prefix, []Put{{Key: []byte("s\x00e"), Value: []byte("three")}}, nil); err == nil {
		t.Fatal("Replace succeeded through a failing write")
	}
	failWrites.Store(false)
	holds(second...)
	if _, err := os.Stat(filepath.Join(dir, ingestFile)); !os.IsNotExist(err) {
		t.Errorf("the ingest file is left behind: %v", err)
	}

	// An aborted Replacement changes nothing and leaves no file.
	r, err := s.BeginReplace(prefix, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Put([]byte("s\x00f"), []byte("four")); err != nil {
		t.Fatal(err)
	}
	r.Abort()
	holds(second...)
	if _, err := os.Stat(filepath.Join(dir, ingestFile)); !os.IsNotExist(err) {
		t.Errorf("the ingest file is left behind after Abort: %v", err)
	}
	if err := r.Commit(); err == nil {
		t.Error("Commit after Abort succeeded")
	}

	// Put copies what it is given: a snapshot reuses one buffer for all
	// its chunks.
	r, err = s.BeginReplace(prefix, nil)
	if err != nil {
		t.Fatal(err)
	}
	key, buf := []byte("s\x00g"), []byte("five")
	if err := r.Put(key, buf); err != nil {
		t.Fatal(err)
	}
	key[2], buf = 'h', append(buf[:0], "six!"...)
	if err := r.Put(key, buf); err != nil {
		t.Fatal(err)
	}
	copy(key, "zzz")
	copy(buf, "zzzz")
	if err := r.Commit(); err != nil {
		t.Fatal(err)
	}
	holds(Put{Key: []byte("s\x00g"), Value: []byte("five")}, Put{Key: []byte("s\x00h"), Value: []byte("six!")})
}

// TestReplaceRewritesNothing: right after Replace returns, the keyspace
// is one table holding exactly the new puts, in the bottom level where it
// overlaps nothing, so no compaction ever rewrites it, however often it is
// replaced and whatever the log writes beside it. The old way (ingest into
// the slot the stored snapshot did not use, then its metadata and a range
// deletion through the WAL) left the old table in place until a flush of
// the memtable, a table spanning the log's newest records and the
// keyspace, made a compaction rewrite them.
func TestReplaceRewritesNothing(t *testing.T) {
	s, err := OpenStore(t.TempDir(), StoreOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	prefix := []byte{KeyspaceSnapshot}
	seq := uint64(0)
	for round := range 4 {
		b := s.db.NewBatch()
		for range 100 {
			seq++
			if err := b.Set(logKey(seq), bytes.Repeat([]byte{'r'}, 100), nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Commit(nil); err != nil {
			t.Fatal(err)
		}
		if round == 2 {
			if err := s.Flush(); err != nil {
				t.Fatal(err)
			}
		}
		first := []byte{KeyspaceSnapshot, 'c', byte(round)}
		puts := []Put{{Key: first, Value: bytes.Repeat([]byte{byte(round)}, 4096)}, {Key: []byte("sm"), Value: []byte{byte(round)}}}
		if err := replace(s, prefix, puts, nil); err != nil {
			t.Fatal(err)
		}
		levels, err := s.db.SSTables()
		if err != nil {
			t.Fatal(err)
		}
		var where []string
		for level, tables := range levels {
			for _, tb := range tables {
				if bytes.Compare(tb.Largest.UserKey, prefix) >= 0 && bytes.Compare(tb.Smallest.UserKey, prefixEnd(prefix)) < 0 {
					where = append(where, fmt.Sprintf("L%d [%q, %q]", level, tb.Smallest.UserKey, tb.Largest.UserKey))
				}
			}
		}
		want := fmt.Sprintf("L%d [%q, %q]", len(levels)-1, first, "sm")
		if len(where) != 1 || where[0] != want {
			t.Fatalf("round %d: the keyspace is in %v, want only %s", round, where, want)
		}
	}
}

// TestReplaceOnAStoreOfAnOlderFormat: a store that builds before Replace
// made (Pebble's oldest format, which cannot excise) is upgraded when it
// opens, and Replace works on it.
func TestReplaceOnAStoreOfAnOlderFormat(t *testing.T) {
	dir := t.TempDir()
	db, err := pebble.Open(filepath.Join(dir, PebbleDir), &pebble.Options{FormatMajorVersion: pebble.FormatMinSupported})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Set([]byte("sm"), []byte("old"), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := OpenStore(dir, StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := replace(s, []byte("s"), []Put{{Key: []byte("sc"), Value: []byte("new")}}, nil); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.Get([]byte("sm")); ok {
		t.Error("the old key survived the replace")
	}
}

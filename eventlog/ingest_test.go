package eventlog

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// TestIngest: a table of puts becomes readable whole, paced value by
// value; keys out of order or in the log's keyspace are refused before
// anything is written; a failed write of the table adds nothing and leaves
// no file behind.
func TestIngest(t *testing.T) {
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

	puts := []Put{{Key: []byte("s\x00a"), Value: []byte("one")}, {Key: []byte("s\x00b"), Value: []byte("two")}}
	var paced []int
	if err := s.Ingest(puts, func(n int) error { paced = append(paced, n); return nil }); err != nil {
		t.Fatal(err)
	}
	for _, p := range puts {
		v, ok, err := s.Get(p.Key)
		if err != nil || !ok || string(v) != string(p.Value) {
			t.Errorf("Get(%q) = %q, %v, %v; want %q", p.Key, v, ok, err, p.Value)
		}
	}
	if len(paced) != 2 || paced[0] != 3 || paced[1] != 3 {
		t.Errorf("paced %v, want [3 3]", paced)
	}

	for name, bad := range map[string][]Put{
		"out of order": {{Key: []byte("s\x00d")}, {Key: []byte("s\x00c")}},
		"log keyspace": {{Key: logKey(1)}},
	} {
		if err := s.Ingest(bad, nil); err == nil {
			t.Errorf("%s: Ingest accepted %q", name, bad[0].Key)
		}
		if _, ok, _ := s.Get(bad[0].Key); ok && name != "log keyspace" {
			t.Errorf("%s: %q was written", name, bad[0].Key)
		}
	}

	failWrites.Store(true)
	if err := s.Ingest([]Put{{Key: []byte("s\x00e"), Value: []byte("three")}}, nil); err == nil {
		t.Fatal("Ingest succeeded through a failing write")
	}
	failWrites.Store(false)
	if _, ok, _ := s.Get([]byte("s\x00e")); ok {
		t.Error("a failed ingest is readable")
	}
	if _, err := os.Stat(filepath.Join(dir, ingestFile)); !os.IsNotExist(err) {
		t.Errorf("the ingest file is left behind: %v", err)
	}
}

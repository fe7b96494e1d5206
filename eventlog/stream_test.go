package eventlog

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
	"time"
)

// TestStreamEnd names the stream each kind of key belongs to: a webhook's
// kind of delivery state, or a whole keyspace.
func TestStreamEnd(t *testing.T) {
	for _, c := range []struct{ key, want string }{
		{"dwh_1\x00r01JX", "dwh_1\x00s"},
		{"dwh_1\x00c", "dwh_1\x00d"},
		{"dwh_1\x00\xff\x01", "dwh_1\x01"},
		{"dwh_1\x00", "dwh_1\x01"},
		{"dwh_1", "e"},
		{"l\x00\x00\x00\x00\x00\x00\x00\x07", "m"},
		{"iacct_1\x00key", "j"},
		{"\xff\x01", ""},
		{"", ""},
	} {
		if got := string(streamEnd([]byte(c.key))); got != c.want {
			t.Errorf("streamEnd(%q) = %q, want %q", c.key, got, c.want)
		}
	}
}

// TestAFlushWritesEachStreamToItsOwnTables writes to several streams in
// one memtable, as every commit with deliveries does, and flushes it: no
// table may span two streams, or the tables of a stream's tail would
// overlap every older key between the two, and each compaction of them
// would rewrite those again (README, "Why creates slowed down").
func TestAFlushWritesEachStreamToItsOwnTables(t *testing.T) {
	store, err := OpenStore(t.TempDir(), StoreOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	streams := []string{"dwh_1\x00a", "dwh_1\x00c", "dwh_1\x00r", "dwh_1\x00s", "dwh_2\x00r", "iacct", "m", "s"}
	var puts []Put
	for i := range 100 {
		for _, s := range streams {
			puts = append(puts, Put{Key: []byte(s + string(rune('a'+i%26)) + strings.Repeat("x", i)), Value: []byte("v")})
		}
	}
	if err := store.WriteSync(puts, nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := store.db.Flush(); err != nil {
		t.Fatal(err)
	}
	levels, err := store.db.SSTables()
	if err != nil {
		t.Fatal(err)
	}
	of := func(key []byte) string {
		for _, s := range streams {
			if bytes.HasPrefix(key, []byte(s)) {
				return s
			}
		}
		return ""
	}
	tables := 0
	for _, level := range levels {
		for _, tb := range level {
			tables++
			if a, b := of(tb.Smallest.UserKey), of(tb.Largest.UserKey); a != b {
				t.Errorf("a table spans the streams %q to %q", a, b)
			}
		}
	}
	if tables != len(streams) {
		t.Errorf("%d tables for %d streams", tables, len(streams))
	}
}

// TestLevelZeroIsCompactedByItsTableCount flushes the tails of eight
// streams a hundred times: the tables overlap nothing, so only their count
// brings about a compaction, and level 0 must come down to about
// l0CompactionFileThreshold tables (Pebble's default would leave 500).
func TestLevelZeroIsCompactedByItsTableCount(t *testing.T) {
	store, err := OpenStore(t.TempDir(), StoreOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	streams := []string{"dwh_1\x00a", "dwh_1\x00r", "dwh_1\x00s", "dwh_2\x00a", "dwh_2\x00r", "dwh_2\x00s", "iacct", "s"}
	for i := range 100 {
		var puts []Put
		for _, s := range streams {
			puts = append(puts, Put{Key: binary.BigEndian.AppendUint32([]byte(s), uint32(i)), Value: []byte("v")})
		}
		if err := store.WriteSync(puts, nil, nil); err != nil {
			t.Fatal(err)
		}
		if err := store.db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	limit := int64(l0CompactionFileThreshold + len(streams))
	deadline := time.Now().Add(30 * time.Second)
	for {
		n := store.db.Metrics().Levels[0].TablesCount
		if n <= limit {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("level 0 still holds %d tables, more than %d", n, limit)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

package eventlog

import (
	"testing"
)

// TestTxnDeleteCommitsWithTheGroup deletes a bookkeeping key in the same
// transaction as an event: both land with the commit, neither before; a
// key of the log's keyspace is refused.
func TestTxnDeleteCommitsWithTheGroup(t *testing.T) {
	h := openHarness(t, "")
	key := []byte{KeyspaceIdempotency, 1, 'a'}
	if err := h.store.WriteSync([]Put{{Key: key, Value: []byte("v")}}, nil, nil); err != nil {
		t.Fatal(err)
	}
	tx, err := h.log.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Delete(logKey(1)); err == nil {
		t.Error("deleting a key of the log's keyspace was accepted")
	}
	if _, err := tx.Add([]Event{{Payload: note{N: 1}}}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Delete(key); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := h.store.Get(key); !ok {
		t.Fatal("the key is gone before the commit")
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := h.store.Get(key); ok {
		t.Error("the key is still there after the commit")
	}
	if h.log.DurableSeq() != 1 {
		t.Errorf("durable seq %d, want 1", h.log.DurableSeq())
	}
}

// TestScanFromStartsAtItsBound reads a keyspace from a key on.
func TestScanFromStartsAtItsBound(t *testing.T) {
	h := openHarness(t, "")
	prefix := []byte{KeyspaceIdempotency, 1}
	var puts []Put
	for _, c := range "abcd" {
		puts = append(puts, Put{Key: append(append([]byte(nil), prefix...), byte(c)), Value: []byte{byte(c)}})
	}
	puts = append(puts, Put{Key: []byte{KeyspaceIdempotency, 2, 'z'}, Value: []byte("z")})
	if err := h.store.WriteSync(puts, nil, nil); err != nil {
		t.Fatal(err)
	}
	var got string
	err := h.store.ScanFrom(prefix, append(append([]byte(nil), prefix...), 'b'), func(k, v []byte) error {
		got += string(v)
		return nil
	})
	if err != nil || got != "bcd" {
		t.Errorf("ScanFrom: %q, %v; want \"bcd\"", got, err)
	}
	got = ""
	if err := h.store.ScanFrom(prefix, nil, func(k, v []byte) error { got += string(v); return nil }); err != nil || got != "abcd" {
		t.Errorf("ScanFrom without a bound: %q, %v; want \"abcd\"", got, err)
	}
}

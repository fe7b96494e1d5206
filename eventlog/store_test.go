package eventlog

import (
	"bytes"
	"testing"
)

// TestAppendValueAppendsPartsInOrder reads two stored values into one
// buffer, as a snapshot's chunks are read, and a missing key leaves the
// buffer as it was.
func TestAppendValueAppendsPartsInOrder(t *testing.T) {
	store, err := OpenStore(t.TempDir(), StoreOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	a, b := []byte("ma"), []byte("mb")
	if err := store.WriteSync([]Put{{Key: a, Value: []byte("first,")}, {Key: b, Value: []byte("second")}}, nil, nil); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 0, 64)
	buf, ok, err := store.AppendValue(buf, a)
	if err != nil || !ok {
		t.Fatalf("first part: ok %v, %v", ok, err)
	}
	buf, ok, err = store.AppendValue(buf, b)
	if err != nil || !ok {
		t.Fatalf("second part: ok %v, %v", ok, err)
	}
	if want := "first,second"; string(buf) != want {
		t.Fatalf("got %q, want %q", buf, want)
	}
	again, ok, err := store.AppendValue(buf, []byte("mmissing"))
	if err != nil || ok || !bytes.Equal(again, buf) {
		t.Fatalf("missing key: ok %v, %v, buffer %q", ok, err, again)
	}
	if _, _, err := store.AppendValue(nil, logKey(1)); err == nil {
		t.Fatal("a log key was read as a bookkeeping key")
	}
}

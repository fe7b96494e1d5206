package http

import (
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
)

// TestRequestIDsSayNothingOfTraffic: ids minted in one millisecond are
// distinct, and the entropy of one says nothing of how many were minted
// before it (a counter there let a client count other accounts'
// requests between two of its own).
func TestRequestIDsSayNothingOfTraffic(t *testing.T) {
	ids := newRequestIDs()
	at := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	seen := map[string]bool{}
	var prev uint64
	steps := 0
	for i := range 1000 {
		s := ids.New(at)
		if seen[s] {
			t.Fatalf("id %s minted twice", s)
		}
		seen[s] = true
		rest, ok := strings.CutPrefix(s, "req_")
		id, err := ulid.ParseStrict(strings.ToUpper(rest))
		if !ok || err != nil || id.Time() != ulid.Timestamp(at) {
			t.Fatalf("id %q: not req_ and a ULID of its time (%v)", s, err)
		}
		n := binary.BigEndian.Uint64(id[8:16])
		if i > 0 && n-prev < 1<<16 {
			steps++
		}
		prev = n
	}
	if steps > 2 {
		t.Errorf("%d of 999 ids follow the one before by a small step: a counter shows through", steps)
	}
}

package eventlog

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
)

// AppendID encodes lowercase by itself: it must write what ulid's own
// encoder writes, lowered.
func TestAppendIDIsULIDsEncodingLowered(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	ids := []ulid.ULID{{}, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}
	for range 10000 {
		var id ulid.ULID
		for i := range id {
			id[i] = byte(rng.IntN(256))
		}
		ids = append(ids, id)
	}
	for bit := range 128 {
		var id ulid.ULID
		id[bit/8] = 0x80 >> (bit % 8)
		ids = append(ids, id)
	}
	for _, id := range ids {
		if got, want := FormatID("ses_", id), "ses_"+strings.ToLower(id.String()); got != want {
			t.Fatalf("FormatID(%x) = %s, want %s", id[:], got, want)
		}
	}
}

// New mints what ulid.New mints from the same source and clock (seeded
// sources, and so every golden test's ids, depend on it), with one
// allocation: the string.
func TestNewMintsWhatULIDNewMints(t *testing.T) {
	clock := FixedClock(time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC))
	ids, ref := NewSeededIDs(clock, 42), NewSeededIDs(clock, 42)
	for i := range 1000 {
		if i == 500 { // a new millisecond: the entropy is read afresh
			clock = FixedClock(time.Date(2026, 11, 25, 12, 0, 1, 0, time.UTC))
			ids.clock, ref.clock = clock, clock
		}
		want, err := ulid.New(ulid.Timestamp(clock()), ref.entropy)
		if err != nil {
			t.Fatal(err)
		}
		if got := ids.New("ses_"); got != FormatID("ses_", want) {
			t.Fatalf("id %d: %s, want %s", i, got, FormatID("ses_", want))
		}
	}
	if n := testing.AllocsPerRun(100, func() { ids.New("ses_") }); n > 1 {
		t.Errorf("New allocates %v times, want 1", n)
	}
}

// An answer of 20 sessions encodes about 60 ids.
func BenchmarkAppendID(b *testing.B) {
	id := ulid.ULID{0x01, 0x9a, 0x3c, 0x4e, 0x5f, 0x60, 0x71, 0x82, 0x93, 0xa4, 0xb5, 0xc6, 0xd7, 0xe8, 0xf9, 0x0a}
	buf := make([]byte, 0, 64)
	for b.Loop() {
		buf = AppendID(buf[:0], "ses_", id)
	}
}

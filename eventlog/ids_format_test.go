package eventlog

import (
	"math/rand/v2"
	"strings"
	"testing"

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

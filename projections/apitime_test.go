package projections

import (
	"math/rand/v2"
	"testing"
	"time"
)

// apiTime writes its digits itself: it must say what Format says.
func TestAPITimeIsFormat(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	secs := []int64{0, -1, 253402300799, 253402300800, -62135596800, -62135596801, time.Date(2026, 2, 28, 23, 59, 59, 0, time.UTC).Unix()}
	for range 100000 {
		secs = append(secs, rng.Int64N(1<<38)-1<<37)
	}
	for _, s := range secs {
		if got, want := apiTime(s), time.Unix(s, 0).UTC().Format(timeFormat); got != want {
			t.Fatalf("apiTime(%d) = %s, want %s", s, got, want)
		}
	}
}

package projections

import (
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
)

// Slices from one block never reach into each other: an append within a
// slice's capacity stays in it, and one past it moves the slice.
func TestBlockSlicesStayApart(t *testing.T) {
	var b block[int]
	var slices [][]int
	for i := 0; i < 3*blockLen; i++ {
		n := 1 + i%3
		s := b.slice(n)
		if len(s) != 0 || cap(s) != n {
			t.Fatalf("slice(%d): len %d cap %d", n, len(s), cap(s))
		}
		for j := 0; j <= n; j++ { // one more than fits: the last append moves it
			s = append(s, i)
		}
		slices = append(slices, s)
	}
	for i, s := range slices {
		for _, v := range s {
			if v != i {
				t.Fatalf("slice %d holds %v: another slice wrote into it", i, s)
			}
		}
	}
	p, q := b.new(7), b.new(8)
	if *p != 7 || *q != 8 || p == q {
		t.Fatalf("new: %d at %p, %d at %p", *p, p, *q, q)
	}
}

// Text kept in blocks reads back unchanged, across many blocks, however
// it was given; long text is not copied.
func TestTextBlocksKeepEveryString(t *testing.T) {
	var tx text
	rng := rand.New(rand.NewPCG(1, 2))
	var want, got []string
	for i := 0; i < 20_000; i++ {
		s := strings.Repeat(string(rune('a'+i%26)), rng.IntN(200)) + "·" + string(rune('A'+i%26))
		want = append(want, s)
		if i%2 == 0 {
			got = append(got, tx.keep(s))
		} else {
			got = append(got, tx.keepBytes([]byte(s)))
		}
	}
	runtime.GC() // nothing may depend on the givers' copies
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("string %d: %q, want %q", i, got[i], want[i])
		}
	}
	long := strings.Repeat("x", textBlockLen)
	if tx.keep(long) != long || tx.keepBytes([]byte(long)) != long {
		t.Fatal("a long string changed")
	}
	if tx.keep("") != "" || tx.keepBytes(nil) != "" {
		t.Fatal("an empty string is not empty")
	}
}

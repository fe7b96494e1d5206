package projections

import (
	"math/rand/v2"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// Timelines read back what was appended to each, however their appends
// interleave, as they grow past their room (moving) and past a chunk
// (moving to a slice of their own); and a timeline's earlier length still
// reads its earlier seqs after it grew, as a snapshot's pre-image of a
// session does.
func TestTimelinesKeepEverySeq(t *testing.T) {
	var tl timelines
	rng := rand.New(rand.NewPCG(5, 6))
	const n = 3000
	refs := make([]timelineRef, n)
	lens := make([]uint32, n)
	want := make([][]uint64, n)
	type pre struct {
		i   int
		ref timelineRef
		n   uint32
	}
	var pres []pre
	seq := uint64(0)
	for step := 0; step < 60_000; step++ {
		i := rng.IntN(n)
		if step%7 == 0 {
			i = 0 // one timeline grows past a chunk
		}
		if rng.IntN(50) == 0 {
			pres = append(pres, pre{i, refs[i], lens[i]})
		}
		seq++
		refs[i] = tl.add(refs[i], lens[i], seq)
		lens[i]++
		want[i] = append(want[i], seq)
		if got := tl.get(refs[i], lens[i]); !slices.Equal(got, want[i]) {
			t.Fatalf("step %d, timeline %d: %v, want %v", step, i, got, want[i])
		}
	}
	for i := range n {
		if got := tl.get(refs[i], lens[i]); !slices.Equal(got, want[i]) {
			t.Fatalf("timeline %d at the end: %v, want %v", i, got, want[i])
		}
	}
	for _, p := range pres {
		if got := tl.get(p.ref, p.n); !slices.Equal(got, want[p.i][:p.n]) {
			t.Fatalf("timeline %d at %d seqs, read later: %v, want %v", p.i, p.n, got, want[p.i][:p.n])
		}
	}
	if refs[0]&refLongTimeline == 0 || len(tl.long) != 1 || len(tl.chunks) < 2 {
		t.Fatalf("the test did not reach a long timeline and several chunks: ref %#x, %d long, %d chunks", refs[0], len(tl.long), len(tl.chunks))
	}
}

// A table finds every value by its id, where add put it, across blocks;
// values never move as more are added; unknown ids are not found.
func TestTableKeepsEveryValueInPlace(t *testing.T) {
	var tb table[int]
	id := func(i int) ID { return ID{byte(i), byte(i >> 8), 0xee} }
	var where []*int
	const n = 3*blockLen + 5
	for i := range n {
		p, num := tb.addNumbered(id(i), i)
		if num != uint32(i) {
			t.Fatalf("value %d numbered %d", i, num)
		}
		where = append(where, p)
	}
	if tb.len() != n || len(tb.blocks) != 4 {
		t.Fatalf("len %d in %d blocks, want %d in 4", tb.len(), len(tb.blocks), n)
	}
	runtime.GC()
	for i := range n {
		p, ok := tb.get(id(i))
		if !ok || p != where[i] || *p != i || tb.at(id(i)) != p {
			t.Fatalf("get(%d) = %v at %p, want %d at %p", i, ok, p, i, where[i])
		}
	}
	// The ids were added out of order (id(256) sorts before id(1)):
	// unknown ones below and above the greatest are not found.
	for _, unknown := range []ID{id(n), {}, {0xff, 0xff, 0xff}} {
		if p, ok := tb.get(unknown); ok || p != nil || tb.at(unknown) != nil {
			t.Fatalf("unknown id %x was found", unknown)
		}
	}
	var empty table[int]
	if _, ok := empty.get(ID{}); ok {
		t.Fatal("the zero id was found in an empty table")
	}
}

// A textRef reads back the string it was made of, in the current block
// as in the ones before it, mixed with the strings keep hands out, at
// every length up to past the longest kept in a block.
func TestTextRefsKeepEveryString(t *testing.T) {
	var tx text
	rng := rand.New(rand.NewPCG(3, 4))
	var want []string
	var refs []textRef
	check := func(i int) {
		t.Helper()
		if got := tx.str(refs[i]); got != want[i] {
			t.Fatalf("ref %d (%#x): %q, want %q", i, refs[i], got, want[i])
		}
	}
	for i := 0; i < 20_000; i++ {
		n := rng.IntN(300)
		switch i % 50 {
		case 0:
			n = textBlockLen/16 + rng.IntN(2) // the longest kept in a block, and one more
		case 1:
			n = 0
		}
		s := strings.Repeat(string(rune('a'+i%26)), n)
		tx.keep(strings.Repeat("-", rng.IntN(100)))
		want = append(want, s)
		if i%2 == 0 {
			refs = append(refs, tx.keep(s))
		} else {
			refs = append(refs, tx.keepBytes([]byte(s)))
		}
		check(i)
	}
	if len(tx.full) < 10 || len(tx.long) == 0 {
		t.Fatalf("%d blocks and %d long strings: the test does not reach past one block", len(tx.full), len(tx.long))
	}
	runtime.GC()
	for i := range want {
		check(i)
	}
}

// A session and a contact hold no pointer, so the blocks of their tables
// are never scanned by the garbage collector (model.go).
func TestSessionsAndContactsHoldNoPointer(t *testing.T) {
	var walk func(reflect.Type, string)
	walk = func(ty reflect.Type, path string) {
		switch ty.Kind() {
		case reflect.Struct:
			for i := range ty.NumField() {
				walk(ty.Field(i).Type, path+"."+ty.Field(i).Name)
			}
		case reflect.Array:
			walk(ty.Elem(), path+"[]")
		case reflect.Pointer, reflect.Slice, reflect.Map, reflect.String, reflect.Interface, reflect.Chan, reflect.Func, reflect.UnsafePointer:
			t.Errorf("%s is a %s", path, ty.Kind())
		}
	}
	walk(reflect.TypeFor[session](), "session")
	walk(reflect.TypeFor[contact](), "contact")
}

// The e-mail index finds each contact by its address's key, whatever the
// case it was given in, and nothing for an unknown one, also when
// addresses share a hash: with every key of one hash, all but the first
// go by name.
func TestEmailIndexFindsEveryContact(t *testing.T) {
	for _, clashing := range []bool{false, true} {
		s := NewState()
		var x emailIndex
		if clashing {
			x.hash = func(string) uint64 { return 7 }
		}
		emails := []string{"pat@example.com", "Lee@Example.com", "sam@example.com", "ΣIGMA@example.com"}
		for i, e := range emails {
			_, n := s.contacts.addNumbered(ID{byte(i)}, contact{email: s.text.keep(e)})
			if x.get(s, emailKey(e)) != nil {
				t.Fatalf("clashing %v: %s found before it was added", clashing, e)
			}
			x.add(s, emailKey(e), n)
		}
		for _, e := range emails {
			for _, asked := range []string{e, strings.ToUpper(e), strings.ToLower(e)} {
				if c := x.get(s, emailKey(asked)); c == nil || s.text.str(c.email) != e {
					t.Errorf("clashing %v: get(%s) = %v, want %s", clashing, asked, c, e)
				}
			}
		}
		if c := x.get(s, "kim@example.com"); c != nil {
			t.Errorf("clashing %v: an unknown address found %s", clashing, s.text.str(c.email))
		}
		if want := map[bool]int{false: 0, true: 3}[clashing]; len(x.clash) != want {
			t.Errorf("clashing %v: %d kept by name, want %d", clashing, len(x.clash), want)
		}
	}
}

// isKeyOf agrees with comparing emailKey's result on every kind of
// address: ASCII, capitals, runes whose lower case is longer or shorter
// in UTF-8 (Ⱥ, the Kelvin sign), invalid bytes, prefixes and extensions;
// and it allocates nothing for a stored address with capitals.
func TestIsKeyOfLowersAsEmailKey(t *testing.T) {
	alphabet := []string{"a", "B", "@", ".", "Σ", "σ", "Ⱥ", "ⱥ", "\u212a", "k", "\xff", "\uFFFD", "İ", "i"}
	rng := rand.New(rand.NewPCG(3, 4))
	word := func() string {
		var b strings.Builder
		for range rng.IntN(6) {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		return b.String()
	}
	for i := 0; i < 200_000; i++ {
		email := word()
		keys := []string{emailKey(email), word(), emailKey(email) + "a", strings.TrimSuffix(emailKey(email), "a"), email}
		for _, key := range keys {
			if got, want := isKeyOf(key, email), emailKey(email) == key; got != want {
				t.Fatalf("isKeyOf(%q, %q) = %v, emailKey says %v", key, email, got, want)
			}
		}
	}
	if n := testing.AllocsPerRun(100, func() { isKeyOf("lee@example.com", "Lee@Example.COM") }); n != 0 {
		t.Fatalf("%v allocations a call", n)
	}
}

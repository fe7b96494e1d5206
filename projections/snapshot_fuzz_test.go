package projections

import "testing"

// FuzzDecodeSnapshot feeds decodeSnapshot arbitrary bytes, seeded with
// real snapshots: it never panics, and a state it accepts encodes again
// without panicking (the next save does exactly that).
func FuzzDecodeSnapshot(f *testing.F) {
	e := openEnv(f, "", DefaultOptions)
	g := newOpGen(f, e, 11)
	for n := range 3 {
		var b []byte
		var err error
		e.p.View(func(s *State) { b, err = s.encodeSnapshot() })
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		for range 40 * n {
			g.step()
		}
	}
	f.Add(NewState().mustEncode(f))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := decodeSnapshot(b)
		if err != nil {
			return
		}
		if _, err := s.encodeSnapshot(); err != nil {
			t.Fatalf("a decoded snapshot does not encode: %v", err)
		}
	})
}

func (s *State) mustEncode(tb testing.TB) []byte {
	b, err := s.encodeSnapshot()
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

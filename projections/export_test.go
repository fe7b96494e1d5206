package projections

// What the benchmarks, which live outside the package to use projtest,
// read of its insides.

// SessionCount is the number of sessions s holds.
func SessionCount(s *State) int { return s.sessions.len() }

// SnapMetaKey is the key of the stored snapshot's metadata.
var SnapMetaKey = snapMetaKey

// EncodeSnapshot encodes a snapshot as SaveSnapshot does, without
// writing it: the benchmarks tell the encoding's effect on reads from
// the write's.
func EncodeSnapshot(p *Projections) error {
	p.snapMu.Lock()
	defer p.snapMu.Unlock()
	w := newSnapWriter(func([]byte) error { return nil })
	if _, err := p.encodeInSteps(w, snapshotStep, nil); err != nil {
		return err
	}
	w.emit(true)
	return w.err
}

// SnapshotRoundTrip encodes s as a snapshot and decodes it.
func SnapshotRoundTrip(s *State) (*State, error) {
	b, err := s.encodeSnapshot()
	if err != nil {
		return nil, err
	}
	return decodeSnapshot(b)
}

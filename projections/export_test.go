package projections

// What the benchmarks, which live outside the package to use projtest,
// read of its insides.

// SessionCount is the number of sessions s holds.
func SessionCount(s *State) int { return len(s.sessions) }

// SnapMetaKey is the key of the stored snapshot's metadata.
var SnapMetaKey = snapMetaKey

//go:build race

package projections

// raceEnabled: under the race detector sync.Pool drops a quarter of what
// it is given, so a test of what a pool saves cannot count on it.
const raceEnabled = true

package eventlog

import "testing"

// TestAddAllocatesNoBufferPerRecord: a record is encoded into a buffer
// the log reuses, which the batch copies. What
// Add still allocates per call is its result, the event's id, the encoded
// payload and the batch's growth.
func TestAddAllocatesNoBufferPerRecord(t *testing.T) {
	h := openHarness(t, "")
	tx, err := h.log.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Abort()
	events := []Event{{Payload: note{Text: "a note of some length, as a session's payload is", N: 7}}}
	if _, err := tx.Add(events); err != nil { // the buffer's first growth
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := tx.Add(events); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("%.1f allocations per Add", allocs)
	// 7 when each record had a buffer of its own.
	if allocs > 6 {
		t.Errorf("Add allocates %.1f times, want at most 6", allocs)
	}
}

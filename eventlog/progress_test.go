package eventlog

import (
	"bytes"
	"testing"
)

// Export tells its progress from 0 to the whole log, and everything it
// counted is already in the writer at each call, so a progress line
// written there lands between whole records.
func TestExportAndVerifyTellTheirProgress(t *testing.T) {
	h := openHarness(t, "")
	const n = progressEvery*2 + 5
	h.append(n)

	var out bytes.Buffer
	var calls [][2]uint64
	got, err := h.log.ExportProgress(&out, 0, func(done, total uint64) {
		calls = append(calls, [2]uint64{done, total})
		if lines := uint64(bytes.Count(out.Bytes(), []byte("\n"))); lines != done {
			t.Errorf("progress %d with %d lines written", done, lines)
		}
	})
	if err != nil || got != n {
		t.Fatalf("ExportProgress: %d, %v", got, err)
	}
	want := [][2]uint64{{0, n}, {progressEvery, n}, {2 * progressEvery, n}, {n, n}}
	if len(calls) != len(want) {
		t.Fatalf("export progress %v, want %v", calls, want)
	}
	for i := range want {
		if calls[i] != want[i] {
			t.Fatalf("export progress %v, want %v", calls, want)
		}
	}

	calls = nil
	verified, err := h.log.VerifyProgress(func(done, total uint64) { calls = append(calls, [2]uint64{done, total}) })
	if err != nil || verified != n {
		t.Fatalf("VerifyProgress: %d, %v", verified, err)
	}
	if calls[0] != [2]uint64{0, n} || calls[len(calls)-1] != [2]uint64{n, n} {
		t.Fatalf("verify progress %v: want it to start at 0 and end at %d of %d", calls, n, n)
	}
}

package eventlog

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// importLinesFor writes n hand-written records as import lines.
func importLinesFor(n int) []byte {
	var b bytes.Buffer
	for i := range n {
		fmt.Fprintf(&b, `{"type":"note","time":"2026-11-21T12:00:00Z","account_id":"acc_1","data":{"text":%q,"n":%d}}`+"\n",
			strings.Repeat("x", 200), i)
	}
	return b.Bytes()
}

// smallChunks makes imports write a batch every few records, so that a
// test input spans many chunks.
func smallChunks(t *testing.T) {
	old := importChunkBytes
	importChunkBytes = 4 << 10
	t.Cleanup(func() { importChunkBytes = old })
}

func TestAnImportRefusedAfterManyChunksLeavesNothing(t *testing.T) {
	smallChunks(t)
	input := append(importLinesFor(500), []byte(`{"type":"nope","time":"2026-11-21T12:00:00Z","account_id":"acc_1","data":{}}`+"\n")...)
	dir := t.TempDir()
	store, err := OpenStore(dir, StoreOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	chunks := 0
	_, err = Import(store, testRegistry(), bytes.NewReader(input), ImportOptions{Progress: func(uint64) { chunks++ }})
	var ie *ImportError
	if !errors.As(err, &ie) || ie.Line != 501 {
		t.Fatalf("Import = %v, want an ImportError at line 501", err)
	}
	if chunks < 10 {
		t.Fatalf("the input was written in %d chunks; the test needs many", chunks)
	}
	if empty, err := store.logEmpty(); err != nil || !empty {
		t.Errorf("after a refused import the log is empty = %v, %v; want true", empty, err)
	}
	if staged, _ := store.importing(); staged {
		t.Error("the import mark is still there after a refused import")
	}
	// The same dir takes a good import at once.
	if n, err := Import(store, testRegistry(), bytes.NewReader(importLinesFor(10)), ImportOptions{}); err != nil || n != 10 {
		t.Fatalf("a good import after the refused one = %d, %v", n, err)
	}
	store.Close()
	h := openHarness(t, dir)
	if n, err := h.log.Verify(); err != nil || n != 10 {
		t.Errorf("Verify = %d, %v; want 10", n, err)
	}
}

const importChildEnv = "EVENTLOG_IMPORT_CHILD_DIR"

// TestImportChild is the child half of TestAKilledImportIsNeverALog: it
// imports standard input in small chunks and reports every chunk.
func TestImportChild(t *testing.T) {
	dir := os.Getenv(importChildEnv)
	if dir == "" {
		t.Skip("runs only as the child process of TestAKilledImportIsNeverALog")
	}
	importChunkBytes = 4 << 10
	store, err := OpenStore(dir, StoreOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	_, err = Import(store, testRegistry(), os.Stdin, ImportOptions{Progress: func(n uint64) { fmt.Printf("staged %d\n", n) }})
	t.Errorf("the import ended (%v) instead of being killed", err)
}

func TestAKilledImportIsNeverALog(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	dir := t.TempDir()
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestImportChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), importChildEnv+"="+dir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Feed enough for several chunks and keep the input open, so the
	// import is in the middle of its work when it is killed.
	go stdin.Write(importLinesFor(300))
	sc := bufio.NewScanner(stdout)
	chunks := 0
	for chunks < 3 && sc.Scan() {
		if strings.HasPrefix(sc.Text(), "staged ") {
			chunks++
		}
	}
	if chunks < 3 {
		t.Fatalf("the child reported %d chunks before its output ended", chunks)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, stdout)
	cmd.Wait()
	stdin.Close()

	store, err := OpenStore(dir, StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = OpenLog(store, Options{Registry: testRegistry(), IDs: NewIDs(time.Now)})
	if !errors.Is(err, ErrIncompleteImport) {
		t.Fatalf("OpenLog on a killed import = %v, want ErrIncompleteImport", err)
	}
	// Importing again starts over.
	if n, err := Import(store, testRegistry(), bytes.NewReader(importLinesFor(7)), ImportOptions{}); err != nil || n != 7 {
		t.Fatalf("importing again = %d, %v; want 7", n, err)
	}
	store.Close()
	h := openHarness(t, dir)
	if n, err := h.log.Verify(); err != nil || n != 7 {
		t.Errorf("Verify after the new import = %d, %v; want 7", n, err)
	}
}

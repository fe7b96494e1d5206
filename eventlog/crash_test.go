package eventlog

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"
)

// The crash test runs the test binary itself as a child process that
// appends as fast as it can and acknowledges every append that returned.
// The parent kills it with SIGKILL at a random moment and checks that the
// reopened log holds every acknowledged record, unbroken.
const (
	crashDirEnv   = "EVENTLOG_CRASH_DIR"
	crashRoundEnv = "EVENTLOG_CRASH_ROUND"
	crashWriters  = 64
	crashRounds   = 12
	// Each writer stops after this many appends. The parent kills the child
	// long before; the bound only keeps an orphaned child from filling the
	// disk.
	crashMaxPerWriter = 1 << 16
)

// crashEvent identifies one append of a child: round, goroutine, iteration.
type crashEvent struct{ round, g, i int }

func (e crashEvent) text() string { return fmt.Sprintf("crash r%d g%d i%d", e.round, e.g, e.i) }

func parseCrashText(s string) (crashEvent, bool) {
	var e crashEvent
	_, err := fmt.Sscanf(s, "crash r%d g%d i%d", &e.round, &e.g, &e.i)
	return e, err == nil && e.text() == s
}

// TestCrashChild is the child half of TestCrashRecoveryKeepsEveryAcknowledgedAppend.
// Run directly, it skips.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("runs only as the child process of TestCrashRecoveryKeepsEveryAcknowledgedAppend")
	}
	round, err := strconv.Atoi(os.Getenv(crashRoundEnv))
	if err != nil {
		t.Fatalf("%s: %v", crashRoundEnv, err)
	}
	store, err := OpenStore(dir, StoreOptions{Create: true})
	if err != nil {
		t.Fatalf("OpenStore: %v", err)
	}
	log, err := OpenLog(store, Options{Registry: testRegistry(), IDs: NewIDs(time.Now)})
	if err != nil {
		t.Fatalf("OpenLog: %v", err)
	}
	var out sync.Mutex // one unbuffered write per acknowledgement
	var wg sync.WaitGroup
	for g := range crashWriters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range crashMaxPerWriter {
				ev := crashEvent{round: round, g: g, i: i}
				recs, err := log.Append(context.Background(), []Event{{Account: "acc_crash", Actor: "cli", Payload: note{Text: ev.text(), N: i}}})
				if err != nil {
					t.Errorf("Append %+v: %v", ev, err)
					return
				}
				line := fmt.Sprintf("%d %d %d\n", recs[0].Seq, g, i)
				out.Lock()
				_, err = os.Stdout.WriteString(line)
				out.Unlock()
				if err != nil {
					t.Errorf("acknowledging %+v: %v", ev, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	t.Errorf("the child appended %d events per writer without being killed", crashMaxPerWriter)
}

// runCrashChild starts a child appending to dir, kills it with SIGKILL once
// it has acknowledged killAfter appends, and returns every acknowledgement
// it wrote before it died (seq -> event).
func runCrashChild(t *testing.T, dir string, round, killAfter int) map[uint64]crashEvent {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1", "-test.timeout=5m")
	cmd.Env = append(os.Environ(), crashDirEnv+"="+dir, crashRoundEnv+"="+strconv.Itoa(round))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting the child: %v", err)
	}
	acks := map[uint64]crashEvent{}
	killed := false
	var bad []string
	sc := bufio.NewScanner(stdout)
	// Read to EOF: lines written after the kill was decided are
	// acknowledgements too, since each is written after its append returned.
	for sc.Scan() {
		var seq uint64
		var g, i int
		if _, err := fmt.Sscanf(sc.Text(), "%d %d %d", &seq, &g, &i); err != nil {
			bad = append(bad, sc.Text())
			continue
		}
		if prev, dup := acks[seq]; dup {
			t.Errorf("round %d: seq %d acknowledged twice: %+v and g%d i%d", round, seq, prev, g, i)
		}
		acks[seq] = crashEvent{round: round, g: g, i: i}
		if !killed && len(acks) >= killAfter {
			if err := cmd.Process.Kill(); err != nil {
				t.Fatalf("killing the child: %v", err)
			}
			killed = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Errorf("reading the child's output: %v", err)
	}
	err = cmd.Wait()
	if !killed || len(bad) > 0 {
		t.Fatalf("round %d: the child ended on its own after %d acknowledgements (%v)\nunexpected output: %q\nstderr:\n%s",
			round, len(acks), err, bad, stderr.Bytes())
	}
	if err == nil {
		t.Fatalf("round %d: the child survived SIGKILL", round)
	}
	return acks
}

// checkAfterCrash reopens dir and checks it against every acknowledgement
// made in it so far; it then appends one record and returns the new head.
func checkAfterCrash(t *testing.T, dir string, round int, acked map[uint64]crashEvent) uint64 {
	t.Helper()
	h := openHarness(t, dir)
	defer h.close()
	head := h.log.DurableSeq()
	recs := h.all() // Read itself fails on a gap or on a log shorter than head
	if uint64(len(recs)) != head {
		t.Fatalf("round %d: read %d records, durable head is %d", round, len(recs), head)
	}
	bySeq := make(map[uint64]crashEvent, len(recs))
	where := make(map[crashEvent]uint64, len(recs))
	iters := map[[2]int][]int{} // (round, g) -> iterations present, in log order
	for i := range recs {
		r := &recs[i]
		if r.Seq != uint64(i+1) {
			t.Fatalf("round %d: record %d has seq %d", round, i+1, r.Seq)
		}
		v, err := h.log.Registry().Decode(r)
		if err != nil {
			t.Fatalf("round %d: seq %d: %v", round, r.Seq, err)
		}
		n, ok := v.(*note)
		if !ok {
			t.Fatalf("round %d: seq %d holds a %T", round, r.Seq, v)
		}
		if _, err := fmt.Sscanf(n.Text, "parent after round %d", new(int)); err == nil {
			continue
		}
		ev, ok := parseCrashText(n.Text)
		if !ok || n.N != ev.i {
			t.Fatalf("round %d: seq %d holds an unexpected payload %+v", round, r.Seq, n)
		}
		if other, dup := where[ev]; dup {
			t.Errorf("round %d: %+v is stored twice, at seqs %d and %d", round, ev, other, r.Seq)
		}
		where[ev] = r.Seq
		bySeq[r.Seq] = ev
		k := [2]int{ev.round, ev.g}
		iters[k] = append(iters[k], ev.i)
	}

	lost := 0
	for seq, want := range acked {
		got, ok := bySeq[seq]
		if got != want || !ok {
			if lost++; lost <= 10 {
				t.Errorf("round %d: acknowledged seq %d = %+v, but the log holds %+v (present: %v)", round, seq, want, got, ok)
			}
		}
	}
	if lost > 0 {
		t.Fatalf("round %d: %d of %d acknowledged appends are missing or wrong", round, lost, len(acked))
	}

	// A writer appends only after its previous append returned, so its
	// records are iterations 0..m in order, and at most the one append in
	// flight at the kill can be present without an acknowledgement.
	maxAcked := map[[2]int]int{}
	for _, ev := range acked {
		k := [2]int{ev.round, ev.g}
		if m, ok := maxAcked[k]; !ok || ev.i > m {
			maxAcked[k] = ev.i
		}
	}
	for k, is := range iters {
		for j, i := range is {
			if i != j {
				t.Fatalf("round %d: writer g%d of round %d has iterations %v: not 0..n in order", round, k[1], k[0], is)
			}
		}
		m, ok := maxAcked[k]
		if !ok {
			m = -1
		}
		if len(is)-1 > m+1 {
			t.Errorf("round %d: writer g%d of round %d has %d records but only up to i%d acknowledged", round, k[1], k[0], len(is), m)
		}
	}

	if n, err := h.log.Verify(); err != nil || n != head {
		t.Fatalf("round %d: Verify = %d, %v; want %d, nil", round, n, err, head)
	}
	more, err := h.log.Append(context.Background(), []Event{{Account: "acc_crash", Actor: "cli", Payload: note{Text: fmt.Sprintf("parent after round %d", round)}}})
	if err != nil {
		t.Fatalf("round %d: Append after reopening: %v", round, err)
	}
	if more[0].Seq != head+1 {
		t.Fatalf("round %d: Append after reopening got seq %d, want %d", round, more[0].Seq, head+1)
	}
	if n, err := h.log.Verify(); err != nil || n != head+1 {
		t.Fatalf("round %d: Verify after the new append = %d, %v; want %d, nil", round, n, err, head+1)
	}
	return head + 1
}

func TestCrashRecoveryKeepsEveryAcknowledgedAppend(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))

	// The first half of the rounds each crash a fresh data dir; the second
	// half keep crashing one dir, so recovery also starts from a log that
	// has already been through crashes and recoveries.
	var dir string
	var acked map[uint64]crashEvent
	for round := range crashRounds {
		reuse := round >= crashRounds/2
		if !reuse {
			dir, acked = t.TempDir(), map[uint64]crashEvent{}
		}
		killAfter := 200 + rng.IntN(1801)
		got := runCrashChild(t, dir, round, killAfter)
		if len(got) < killAfter {
			t.Fatalf("round %d: %d acknowledgements, want at least %d", round, len(got), killAfter)
		}
		for seq, ev := range got {
			if prev, dup := acked[seq]; dup {
				t.Fatalf("round %d: seq %d acknowledged again (first for %+v in an earlier life of the dir)", round, seq, prev)
			}
			acked[seq] = ev
		}
		head := checkAfterCrash(t, dir, round, acked)
		t.Logf("round %d (reused dir: %v): killed after %d acknowledgements (asked for %d); log head now %d", round, reuse, len(got), killAfter, head)
	}
}

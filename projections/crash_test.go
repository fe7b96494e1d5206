package projections

import (
	"bufio"
	"bytes"
	"context"
	crand "crypto/rand"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"demosvc/eventlog"
)

// The crash test runs the test binary itself as a child process that
// creates agents through the writer (Do, as the API does) from many
// goroutines and prints each agent the moment its command returned. The
// parent kills it with SIGKILL at a random moment and checks that the
// reopened data dir holds every acknowledged agent, in a log whose chain is
// unbroken. Half of the rounds reuse one dir, so recovery also starts from
// a snapshot and a log that have been through crashes already.
const (
	crashDirEnv   = "PROJECTIONS_CRASH_DIR"
	crashRoundEnv = "PROJECTIONS_CRASH_ROUND"
	crashWriters  = 64
	crashRounds   = 12
	// Each writer stops after this many commands. The parent kills the
	// child long before; the bound only keeps an orphan from filling the
	// disk.
	crashMaxPerWriter = 1 << 16
	crashAccount      = "crash"
)

// crashName names one command of a child: round, goroutine, iteration.
func crashName(round, g, i int) string { return fmt.Sprintf("crash r%d g%d i%d", round, g, i) }

type crashAck struct{ round, g, i int }

// TestCrashChild is the child half of TestCrashKeepsEveryAcknowledgedWrite.
// Run directly, it skips.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("runs only as the child process of TestCrashKeepsEveryAcknowledgedWrite")
	}
	round, err := strconv.Atoi(os.Getenv(crashRoundEnv))
	if err != nil {
		t.Fatalf("%s: %v", crashRoundEnv, err)
	}
	store, err := eventlog.OpenStore(dir, eventlog.StoreOptions{Create: true})
	if err != nil {
		t.Fatalf("OpenStore: %v", err)
	}
	log, err := eventlog.OpenLog(store, eventlog.Options{Registry: NewRegistry(), IDs: eventlog.NewIDs(time.Now)})
	if err != nil {
		t.Fatalf("OpenLog: %v", err)
	}
	opts := DefaultOptions
	opts.Sealer, _ = eventlog.NewSealer(make([]byte, eventlog.MasterKeySize), crand.Reader)
	p, err := Open(log, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	pr := crashPrincipal(t, p)
	var out sync.Mutex // one unbuffered write per acknowledgement
	var wg sync.WaitGroup
	for g := range crashWriters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range crashMaxPerWriter {
				v, err := p.CreateAgent(context.Background(), pr, AgentInput{Name: crashName(round, g, i), SandboxURL: "https://sandbox.example.com/"}, nil)
				if err != nil {
					t.Errorf("CreateAgent g%d i%d: %v", g, i, err)
					return
				}
				line := fmt.Sprintf("%s %d %d\n", v.(AgentView).ID, g, i)
				out.Lock()
				_, err = os.Stdout.WriteString(line)
				out.Unlock()
				if err != nil {
					t.Errorf("acknowledging g%d i%d: %v", g, i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	t.Errorf("the child made %d commands per writer without being killed", crashMaxPerWriter)
}

// crashPrincipal returns the crash account, creating it the first time.
func crashPrincipal(t *testing.T, p *Projections) Principal {
	t.Helper()
	for _, a := range p.Accounts() {
		if a.Name == crashAccount {
			return Principal{Account: a, KeyID: "key_crash"}
		}
	}
	a, err := p.CreateAccount(context.Background(), "cli", crashAccount, PlanPro, 0)
	if err != nil {
		t.Fatalf("CreateAccount: %v", err)
	}
	return Principal{Account: a, KeyID: "key_crash"}
}

// runCrashChild starts a child writing to dir, kills it with SIGKILL once
// it has acknowledged killAfter commands, and returns every
// acknowledgement it wrote before it died (agent id -> command).
func runCrashChild(t *testing.T, dir string, round, killAfter int) map[string]crashAck {
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
	acks := map[string]crashAck{}
	killed := false
	var bad []string
	sc := bufio.NewScanner(stdout)
	// Read to EOF: lines written after the kill was decided are
	// acknowledgements too, since each is written after its command returned.
	for sc.Scan() {
		var id string
		var g, i int
		if _, err := fmt.Sscanf(sc.Text(), "%s %d %d", &id, &g, &i); err != nil {
			bad = append(bad, sc.Text())
			continue
		}
		if prev, dup := acks[id]; dup {
			t.Errorf("round %d: agent %s acknowledged twice: %+v and g%d i%d", round, id, prev, g, i)
		}
		acks[id] = crashAck{round: round, g: g, i: i}
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

// checkAfterCrash reopens dir, as serve does, and checks it against every
// acknowledgement made in it so far.
func checkAfterCrash(t *testing.T, dir string, round int, acked map[string]crashAck) {
	t.Helper()
	e := openEnv(t, dir, DefaultOptions)
	defer e.close()
	head := e.log.DurableSeq()
	if n, err := e.log.Verify(); err != nil || n != head {
		t.Fatalf("round %d: Verify = %d, %v; want %d, nil", round, n, err, head)
	}

	// The log, in order: which commands of which writer it holds.
	reg := e.log.Registry()
	iters := map[[2]int][]int{} // (round, g) -> iterations, in log order
	inLog := map[string]string{}
	err := e.log.Read(1, 0, func(rec *eventlog.Record) error {
		v, err := reg.Decode(rec)
		if err != nil {
			return err
		}
		ev, ok := v.(*AgentCreated)
		if !ok || strings.HasPrefix(ev.Name, "after round ") {
			return nil
		}
		var r, g, i int
		if _, err := fmt.Sscanf(ev.Name, "crash r%d g%d i%d", &r, &g, &i); err != nil || crashName(r, g, i) != ev.Name {
			return fmt.Errorf("seq %d: unexpected agent name %q", rec.Seq, ev.Name)
		}
		if prev, dup := inLog[ev.AgentID]; dup {
			return fmt.Errorf("seq %d: agent %s created twice (%q, %q)", rec.Seq, ev.AgentID, prev, ev.Name)
		}
		inLog[ev.AgentID] = ev.Name
		iters[[2]int{r, g}] = append(iters[[2]int{r, g}], i)
		return nil
	})
	if err != nil {
		t.Fatalf("round %d: reading the log: %v", round, err)
	}

	// Every acknowledged agent is in the log and in the state rebuilt from it.
	account := crashPrincipal(t, e.p).Account.ID
	lost := 0
	for id, ack := range acked {
		want := crashName(ack.round, ack.g, ack.i)
		v, err := e.p.Agent(account, id)
		if inLog[id] != want || err != nil || v.Name != want {
			if lost++; lost <= 10 {
				t.Errorf("round %d: acknowledged agent %s (%s): log has %q, state has %+v, %v", round, id, want, inLog[id], v, err)
			}
		}
	}
	if lost > 0 {
		t.Fatalf("round %d: %d of %d acknowledged writes are missing or wrong", round, lost, len(acked))
	}

	// A writer sends a command only after its previous one returned, so its
	// agents are iterations 0..m in order, and at most the one command in
	// flight at the kill can be present without an acknowledgement.
	maxAcked := map[[2]int]int{}
	for _, a := range acked {
		k := [2]int{a.round, a.g}
		if m, ok := maxAcked[k]; !ok || a.i > m {
			maxAcked[k] = a.i
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
			t.Errorf("round %d: writer g%d of round %d has %d agents but only up to i%d acknowledged", round, k[1], k[0], len(is), m)
		}
	}

	// The reopened writer goes on from the recovered head.
	v, err := e.p.CreateAgent(context.Background(), crashPrincipal(t, e.p), AgentInput{Name: fmt.Sprintf("after round %d", round), SandboxURL: "https://sandbox.example.com/"}, nil)
	if err != nil {
		t.Fatalf("round %d: CreateAgent after reopening: %v", round, err)
	}
	if e.log.DurableSeq() != head+1 {
		t.Fatalf("round %d: head after a write on the reopened dir = %d, want %d (%v)", round, e.log.DurableSeq(), head+1, v)
	}
	if n, err := e.log.Verify(); err != nil || n != head+1 {
		t.Fatalf("round %d: Verify after the new write = %d, %v; want %d, nil", round, n, err, head+1)
	}
}

func TestCrashKeepsEveryAcknowledgedWrite(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))

	var dir string
	var acked map[string]crashAck
	for round := range crashRounds {
		reuse := round >= crashRounds/2
		if !reuse {
			dir, acked = t.TempDir(), map[string]crashAck{}
		}
		killAfter := 200 + rng.IntN(1801)
		got := runCrashChild(t, dir, round, killAfter)
		if len(got) < killAfter {
			t.Fatalf("round %d: %d acknowledgements, want at least %d", round, len(got), killAfter)
		}
		for id, a := range got {
			acked[id] = a
		}
		checkAfterCrash(t, dir, round, acked)
		t.Logf("round %d (reused dir: %v): killed after %d acknowledgements (asked for %d)", round, reuse, len(got), killAfter)
	}
}

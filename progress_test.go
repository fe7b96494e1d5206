package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"demosvc/config"
	demohttp "demosvc/http"
)

// fixture writes a hand-written log of n accounts to import.
func fixture(t *testing.T, n int) string {
	t.Helper()
	var b strings.Builder
	for i := range n {
		id := "acc_01jbz0000000000000000" + string(rune('a'+i/100%26)) + string(rune('a'+i/10%10)) + string(rune('a'+i%10))
		b.WriteString(`{"type":"account.created","time":"2026-11-01T09:00:00Z","account_id":"` + id +
			`","data":{"account_id":"` + id + `","name":"A","plan":"pro","rate_limit_per_minute":0}}` + "\n")
	}
	path := filepath.Join(t.TempDir(), "fixture.jsonl")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// runWithStderr runs the CLI as main does, with stderr the given file,
// and returns its stdout and exit code.
func runWithStderr(t *testing.T, stderr *os.File, args ...string) (string, int) {
	t.Helper()
	var stdout bytes.Buffer
	getenv := func(string) string { return "" }
	code := run(context.Background(), append([]string{"demosvc"}, args...), getenv, strings.NewReader(""), &stdout, stderr)
	return stdout.String(), code
}

// The long commands draw a bar with a rate and an ETA on a terminal (a
// real pseudo-terminal here) and write nothing to stderr that is not a
// terminal (a pipe); what they print on stdout is the same either way.
func TestProgressBarOnATerminalAndNotOnAPipe(t *testing.T) {
	in := fixture(t, 300)
	type step struct {
		name string
		args func(data string) []string
		bar  string // what the bar shows on a terminal
	}
	steps := []step{
		{"import", func(data string) []string { return []string{"log", "import", "--data", data, in} }, "import"},
		{"export", func(data string) []string { return []string{"log", "export", "--data", data} }, "export"},
		{"verify", func(data string) []string { return []string{"log", "verify", "--data", data} }, "verify"},
	}
	if other, ok := otherFS(t); ok {
		// A backup draws a bar only while it copies, which it does to
		// another file system.
		n := 0
		steps = append(steps, step{"backup", func(data string) []string {
			n++
			return []string{"backup", "--data", data, filepath.Join(other, "bk", string(rune('0'+n)))}
		}, "backup"})
	}

	terminal := map[string]string{}
	piped := map[string]string{}
	ttyData := filepath.Join(t.TempDir(), "tty")
	pipeData := filepath.Join(t.TempDir(), "pipe")
	for _, s := range steps {
		ptmx, tty, err := pty.Open()
		if err != nil {
			t.Skipf("no pseudo-terminal: %v", err)
		}
		if err := pty.Setsize(ptmx, &pty.Winsize{Rows: 40, Cols: 120}); err != nil {
			t.Fatal(err)
		}
		drawn := readAll(ptmx)
		out, code := runWithStderr(t, tty, s.args(ttyData)...)
		tty.Close()
		screen := <-drawn
		ptmx.Close()
		if code != 0 {
			t.Fatalf("%s on a terminal: exit %d, stdout %q, stderr %q", s.name, code, out, screen)
		}
		terminal[s.name] = out
		if !strings.Contains(screen, s.bar) || !strings.Contains(screen, "100%") || !strings.Contains(screen, "/s") {
			t.Errorf("%s on a terminal: no bar with a rate on stderr: %q", s.name, screen)
		}

		pr, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		written := readAll(pr)
		out, code = runWithStderr(t, pw, s.args(pipeData)...)
		pw.Close()
		stderr := <-written
		pr.Close()
		if code != 0 {
			t.Fatalf("%s on a pipe: exit %d, stderr %q", s.name, code, stderr)
		}
		piped[s.name] = out
		if strings.Contains(stderr, "\r") || strings.Contains(stderr, "%") {
			t.Errorf("%s on a pipe: a bar on stderr: %q", s.name, stderr)
		}
		if s.name != "backup" && stderr != "" {
			t.Errorf("%s on a pipe: stderr %q, want nothing", s.name, stderr)
		}
	}
	// Through a running server, the bar is drawn from the progress lines
	// the admin socket streams.
	stopServe, _, serveErr := serveInProcess(t, ttyData, nil)
	for _, s := range steps[1:] {
		ptmx, tty, err := pty.Open()
		if err != nil {
			t.Fatal(err)
		}
		drawn := readAll(ptmx)
		out, code := runWithStderr(t, tty, s.args(ttyData)...)
		tty.Close()
		screen := <-drawn
		ptmx.Close()
		if code != 0 {
			t.Errorf("%s through the server on a terminal: exit %d, stdout %q, stderr %q", s.name, code, out, screen)
		}
		if !strings.Contains(screen, s.bar) || !strings.Contains(screen, "100%") || !strings.Contains(screen, "/s") {
			t.Errorf("%s through the server on a terminal: no bar on stderr: %q", s.name, screen)
		}
		if s.name == "export" && out != terminal["export"] {
			t.Errorf("export through the server printed another log")
		}
	}
	if code := stopServe(); code != 0 {
		t.Fatalf("serve exited %d: %s", code, serveErr.String())
	}

	for _, name := range []string{"import", "export", "verify"} {
		if terminal[name] != piped[name] {
			t.Errorf("%s: stdout differs with a terminal on stderr:\n%s\nvs\n%s", name, terminal[name], piped[name])
		}
	}
	if strings.Count(terminal["export"], "\n") != 300 {
		t.Errorf("export printed %d lines, want 300", strings.Count(terminal["export"], "\n"))
	}
}

// readAll reads r until it fails (a pty's master fails with EIO once the
// terminal side is closed) and sends what it read.
func readAll(r io.Reader) <-chan string {
	ch := make(chan string, 1)
	go func() {
		var b bytes.Buffer
		_, err := io.Copy(&b, r)
		if err != nil && !errors.Is(err, syscall.EIO) && !errors.Is(err, os.ErrClosed) {
			b.WriteString("\nread error: " + err.Error())
		}
		ch <- b.String()
	}()
	return ch
}

// otherFS returns a directory on a file system other than the temp
// dir's, if the machine has one (/dev/shm).
func otherFS(t *testing.T) (string, bool) {
	var a, b syscall.Stat_t
	if syscall.Stat(t.TempDir(), &a) != nil || syscall.Stat("/dev/shm", &b) != nil || a.Dev == b.Dev {
		return "", false
	}
	dir, err := os.MkdirTemp("/dev/shm", "demosvc-progress-test-")
	if err != nil {
		return "", false
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir, true
}

// serve logs the replay's progress at most once per interval, with the
// seq, the head and the rate since the last line.
func TestReplayProgressLogsEveryInterval(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, nil))
	now := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	report := replayProgress(logger, clock, 5*time.Second)
	report(1000, 100_000) // at once: too soon
	now = now.Add(4 * time.Second)
	report(40_000, 100_000) // 4 s: too soon
	now = now.Add(time.Second)
	report(50_000, 100_000) // 5 s: logs, 10,000 events/s
	now = now.Add(time.Second)
	report(60_000, 100_000) // 1 s later: too soon
	now = now.Add(5 * time.Second)
	report(100_000, 100_000) // logs: 50,000 events in 6 s
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("logged %d lines, want 2:\n%s", len(lines), buf.String())
	}
	for i, want := range []string{
		`level=INFO msg="replaying the log" seq=50000 head_seq=100000 events_per_second=10000 eta=5s`,
		`level=INFO msg="replaying the log" seq=100000 head_seq=100000 events_per_second=8333 eta=0s`,
	} {
		if !strings.Contains(lines[i], want) {
			t.Errorf("line %d: %s\nwant it to contain %s", i, lines[i], want)
		}
	}
}

// The verify bar covers the snapshot's check as well as the chain's: every
// progress line has one total, the chain's records and the snapshot's seq,
// and the last one reaches it only once both are done (the replay for the
// snapshot can take as long as the chain).
func TestVerifyProgressCoversTheSnapshotCheck(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer devnull.Close()
	if out, code := runWithStderr(t, devnull, "log", "import", "--data", data, fixture(t, 300)); code != 0 {
		t.Fatalf("import: exit %d, %s", code, out)
	}
	// Opening the state and closing it saves a snapshot at the head.
	if out, code := runWithStderr(t, devnull, "accounts", "list", "--data", data); code != 0 {
		t.Fatalf("accounts list: exit %d, %s", code, out)
	}
	cfg := config.Default()
	cfg.DataDir = data
	d, err := openLocal(cfg, false, false)
	if err != nil {
		t.Fatal(err)
	}
	defer d.close()
	a := &demohttp.Admin{Log: d.log, Config: cfg}
	var out bytes.Buffer
	if _, err := demohttp.DoLocal(context.Background(), a.Handler(), "GET", "/admin/log/verify?progress=true", nil, &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var res demohttp.VerifyResult
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil || !res.OK || res.SnapshotSeq != 300 {
		t.Fatalf("result %s (%v): want ok with the snapshot at 300 checked", lines[len(lines)-1], err)
	}
	var last demohttp.AdminProgress
	for _, l := range lines[:len(lines)-1] {
		if err := json.Unmarshal([]byte(l), &last); err != nil {
			t.Fatalf("progress line %s: %v", l, err)
		}
		if last.Progress.Total != 600 {
			t.Fatalf("progress line %s: want a total of 600, the chain's 300 and the snapshot's 300", l)
		}
	}
	if last.Progress.Done != 600 {
		t.Errorf("last progress line done %d of 600: the bar ends short", last.Progress.Done)
	}
}

// serveInProcess runs `demosvc serve` on data in this process, with the
// environment env (nil: none), and returns once it is ready: stop stops it
// (once; the test's end does too, so that a Fatal does not leave it
// serving for the package's other tests) and returns its exit code; out
// and errOut are what it wrote.
func serveInProcess(t *testing.T, data string, env map[string]string) (stop func() int, out, errOut *syncBuffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan int, 1)
	out, errOut = &syncBuffer{}, &syncBuffer{}
	go func() {
		served <- run(ctx, []string{"demosvc", "serve", "--data", data, "--listen", "127.0.0.1:0"},
			func(k string) string { return env[k] }, strings.NewReader(""), out, errOut)
	}()
	var once sync.Once
	var code int
	stop = func() int { once.Do(func() { cancel(); code = <-served }); return code }
	t.Cleanup(func() { stop() })
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, ok := serverReady(data); ok {
			return stop, out, errOut
		}
		select {
		case code := <-served:
			served <- code // for stop
			t.Fatalf("serve exited %d before it was ready: %s", code, errOut.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("server not ready after 30s: %s", errOut.String())
		}
		time.Sleep(20 * time.Millisecond) // polling interval, not synchronisation
	}
}

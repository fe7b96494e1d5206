package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"demosvc/config"
	"demosvc/eventlog"
)

// A data dir's lock is blamed on the server its serve.json names only
// while that process runs: one killed with SIGKILL leaves the file behind,
// and its pid may since be another process's.
func TestLockMessageTrustsServeJSONOnlyWhileItsProcessRuns(t *testing.T) {
	dir := t.TempDir()
	info := func(pid int) {
		b := `{"pid":` + strconv.Itoa(pid) + `,"listen":"127.0.0.1:1","started_at":"2026-11-27T00:00:00Z"}`
		if err := os.WriteFile(filepath.Join(dir, serveInfoFile), []byte(b), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	info(os.Getpid())
	if got := lockMessage(dir); !strings.Contains(got, "in use by demosvc serve (pid "+strconv.Itoa(os.Getpid())) {
		t.Errorf("with a running pid: %q; want it named", got)
	}
	info(1<<31 - 1) // beyond any pid_max: no such process
	if got := lockMessage(dir); !strings.Contains(got, "in use by another process") || strings.Contains(got, "pid") {
		t.Errorf("with a pid that is gone: %q; want another process, no pid", got)
	}
}

// A data dir of another user is not opened by root: the files a command
// created there would be root's, and the service's user could no longer
// open the store. Needs root, to give the data dir away.
func TestADataDirOfAnotherUserIsRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("giving a data dir to another user needs root")
	}
	dir := t.TempDir()
	if err := checkOwner(dir, true); err != nil {
		t.Fatalf("one's own data dir: %v", err)
	}
	if err := checkOwner(filepath.Join(dir, "new"), true); err != nil {
		t.Fatalf("a data dir to create: %v", err)
	}
	theirs := filepath.Join(dir, "theirs")
	if err := os.Mkdir(theirs, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(theirs, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	err := checkOwner(theirs, true)
	if err == nil || !strings.Contains(err.Error(), "belongs to") || !strings.Contains(err.Error(), "sudo -u ") {
		t.Fatalf("another user's data dir: %v; want a refusal saying whose it is and how to run as them", err)
	}
	// Root's own data dir, group-writable for the service (Kubernetes'
	// fsGroup, or install -o root -g demosvc -m 2770): taken.
	ours := filepath.Join(dir, "ours")
	if err := os.Mkdir(ours, 0o2770); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(ours, 0, 65534); err != nil {
		t.Fatal(err)
	}
	if err := checkOwner(ours, true); err != nil {
		t.Fatalf("root's group-writable data dir: %v", err)
	}
}

// A backup the server says it wrote must be where the command looks: a
// server with a file system view of its own (systemd's PrivateTmp) writes
// elsewhere, and the command says so rather than print success.
func TestABackupTheCommandCannotSeeIsAnError(t *testing.T) {
	dir := t.TempDir()
	if err := backupVisible(dir); err == nil || !strings.Contains(err.Error(), "does not see one there") {
		t.Fatalf("no backup in %s: %v, want an error", dir, err)
	}
	if err := os.Mkdir(filepath.Join(dir, "pebble"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := backupVisible(dir); err != nil {
		t.Fatalf("a backup in %s: %v", dir, err)
	}
}

// TestInterruptedLogCommandsSayItAndFail: interrupted (SIGINT or SIGTERM
// end the context main runs with), the log commands run in this process
// stop, exit 1 saying so, and leave no half line on stdout; an interrupted
// import imports nothing and leaves no data dir behind. Before, they ran
// to the end and exited 0 whatever the signal.
func TestInterruptedLogCommandsSayItAndFail(t *testing.T) {
	src := fixture(t, 300)
	data := filepath.Join(t.TempDir(), "data")
	if _, code := runWithStderr(t, nil, "log", "import", "--data", data, src); code != 0 {
		t.Fatalf("import: exit %d", code)
	}
	interrupted, cancel := context.WithCancel(context.Background())
	cancel()
	run := func(args ...string) (string, string, int) {
		var stdout, stderr bytes.Buffer
		code := run(interrupted, append([]string{"demosvc"}, args...), func(string) string { return "" }, strings.NewReader(""), &stdout, &stderr)
		return stdout.String(), stderr.String(), code
	}
	for _, args := range [][]string{{"log", "export"}, {"log"}, {"log", "verify"}} {
		out, errOut, code := run(append(args, "--data", data)...)
		if code != 1 || !strings.Contains(errOut, "interrupted") || out != "" && !strings.HasSuffix(out, "\n") {
			t.Errorf("%v interrupted: exit %d, stderr %q, stdout ending %q; want exit 1 saying so, whole lines only", args, code, errOut, out[max(0, len(out)-40):])
		}
	}
	if _, errOut, code := run("log", "--follow", "--data", data); code != 0 {
		t.Errorf("log --follow interrupted: exit %d, stderr %q; want 0, the end of following", code, errOut)
	}
	fresh := filepath.Join(t.TempDir(), "fresh")
	_, errOut, code := run("log", "import", "--data", fresh, src)
	if _, err := os.Stat(fresh); code != 1 || !strings.Contains(errOut, "interrupted: nothing was imported") || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("import interrupted: exit %d, stderr %q, data dir %v; want exit 1, nothing imported, no data dir", code, errOut, err)
	}
}

// An import from standard input that is interrupted while it waits for
// more input (a pipe whose writer is slow or stuck) stops at once, imports
// nothing and leaves no data dir; so does one whose input ends after the
// interrupt. Before, it went on waiting, and then committed what it had
// read and exited 0.
func TestAnImportInterruptedWhileItWaitsForInputImportsNothing(t *testing.T) {
	lines, err := os.ReadFile(fixture(t, 2))
	if err != nil {
		t.Fatal(err)
	}
	for _, ends := range []bool{false, true} {
		ctx, cancel := context.WithCancel(context.Background())
		in := &stuckInput{data: lines, waiting: make(chan struct{}), release: make(chan struct{})}
		t.Cleanup(in.end)
		data := filepath.Join(t.TempDir(), "data")
		var stdout, stderr bytes.Buffer
		done := make(chan int, 1)
		go func() {
			done <- run(ctx, []string{"demosvc", "log", "import", "--data", data, "-"}, func(string) string { return "" }, in, &stdout, &stderr)
		}()
		<-in.waiting // the import read the lines and waits for more
		cancel()
		if ends {
			in.end()
		}
		code := <-done
		if _, err := os.Stat(data); code != 1 || !strings.Contains(stderr.String(), "interrupted: nothing was imported") ||
			stdout.Len() != 0 || !errors.Is(err, os.ErrNotExist) {
			t.Errorf("input ends after the interrupt %v: exit %d, stdout %q, stderr %q, data dir %v; want exit 1, nothing imported, no data dir",
				ends, code, stdout.String(), stderr.String(), err)
		}
	}
}

// stuckInput reads data, then says it waits (waiting closes) and waits for
// end, which gives io.EOF.
type stuckInput struct {
	data          []byte
	waiting       chan struct{}
	release       chan struct{}
	said, stopped sync.Once
}

func (s *stuckInput) Read(p []byte) (int, error) {
	if len(s.data) > 0 {
		n := copy(p, s.data)
		s.data = s.data[n:]
		return n, nil
	}
	s.said.Do(func() { close(s.waiting) })
	<-s.release
	return 0, io.EOF
}

func (s *stuckInput) end() { s.stopped.Do(func() { close(s.release) }) }

// A data dir held by another command that opened it itself (log --follow
// with no server) is said to be so: not blamed on a serve whose admin
// socket does not answer yet, which there is none of.
func TestADataDirHeldByAnotherCommandIsNotBlamedOnAServe(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	if out, code := runWithStderr(t, nil, "accounts", "create", "--name", "A", "--data", data); code != 0 {
		t.Fatalf("accounts create: exit %d, %s", code, out)
	}
	held, err := eventlog.OpenStore(data, eventlog.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"demosvc", "accounts", "list", "--data", data}, func(string) string { return "" },
		strings.NewReader(""), &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "is in use by another process (another demosvc command that opened it itself") ||
		strings.Contains(stderr.String(), "admin socket") {
		t.Errorf("exit %d, stderr %q; want exit 1 naming another command, no admin socket", code, stderr.String())
	}
}

// fullOutput takes room bytes, then fails every write as a full disk does.
type fullOutput struct{ room int }

func (f *fullOutput) Write(p []byte) (int, error) {
	if len(p) > f.room {
		n := f.room
		f.room = 0
		return n, syscall.ENOSPC
	}
	f.room -= len(p)
	return len(p), nil
}

// TestAnOutputThatCannotBeWrittenIsAFailure: a command whose standard
// output could not all be written (a full disk under `log export >
// dump`, a key created into /dev/full) exits 1 saying so, run in this
// process or through a running server's socket. Before, it exited 0 over
// a cut export, or a key shown once and lost.
func TestAnOutputThatCannotBeWrittenIsAFailure(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	if _, code := runWithStderr(t, nil, "log", "import", "--data", data, fixture(t, 300)); code != 0 {
		t.Fatalf("import: exit %d", code)
	}
	const acc = "acc_01jbz0000000000000000aaa" // the fixture's first account
	commands := [][]string{{"log", "export"}, {"log"}, {"log", "verify"}, {"accounts", "list"}, {"keys", "create", "--account", acc}}
	check := func(how string) {
		t.Helper()
		for _, args := range commands {
			var stderr bytes.Buffer
			code := run(context.Background(), append([]string{"demosvc"}, append(args, "--data", data)...),
				func(string) string { return "" }, strings.NewReader(""), &fullOutput{room: 40}, &stderr)
			if code != exitFail || !strings.Contains(stderr.String(), "writing the output") || !strings.Contains(stderr.String(), "no space left") {
				t.Errorf("%s, %v into a full output: exit %d, stderr %q; want exit 1 saying the output could not be written", how, args, code, stderr.String())
			}
		}
	}
	check("in this process")
	for _, args := range [][]string{{"version"}, {"help"}, {"serve", "--help"}} {
		var stderr bytes.Buffer
		code := run(context.Background(), append([]string{"demosvc"}, args...),
			func(string) string { return "" }, strings.NewReader(""), &fullOutput{}, &stderr)
		if code != exitFail || !strings.Contains(stderr.String(), "writing the output") {
			t.Errorf("%v into a full output: exit %d, stderr %q; want exit 1 saying the output could not be written", args, code, stderr.String())
		}
	}

	serveInProcess(t, data, nil)
	check("through the server")
}

// The hosts of cluster.routes, the nodes that forward writes to the
// writer over many connections, are not held to
// http.max_connections_per_client: literal addresses as they are, names
// as they resolve (localhost, from /etc/hosts: no query leaves the
// machine).
func TestClusterPeersAreTheHostsOfTheRoutes(t *testing.T) {
	cfg := config.Default()
	cfg.Cluster.Enabled = true
	cfg.Cluster.Routes = "10.0.0.1:6222, [fd00::2]:6222,localhost:6222"
	got := clusterPeers(cfg, slog.New(slog.DiscardHandler))
	has := func(p string) bool { return slices.Contains(got, netip.MustParsePrefix(p)) }
	if !has("10.0.0.1/32") || !has("fd00::2/128") || !has("127.0.0.1/32") {
		t.Errorf("clusterPeers = %v; want 10.0.0.1/32, fd00::2/128 and localhost's 127.0.0.1/32", got)
	}
	cfg.Cluster.Enabled = false
	if got := clusterPeers(cfg, slog.New(slog.DiscardHandler)); got != nil {
		t.Errorf("one node: clusterPeers = %v, want none", got)
	}
}

// A wrong command line is exit 2, found before any data dir is opened: a
// data dir that does not exist is not what the command complains of.
func TestAWrongCommandLineIsExit2BeforeTheDataDir(t *testing.T) {
	nowhere := filepath.Join(t.TempDir(), "never")
	for _, args := range [][]string{
		{"version", "--bogus"},
		{"version", "extra"},
		{"log", "--type", "no.such.type", "--data", nowhere},
		{"log", "--account", "agt_01jbz0000000000000000000g1", "--data", nowhere},
	} {
		stderr, err := os.CreateTemp(t.TempDir(), "stderr")
		if err != nil {
			t.Fatal(err)
		}
		_, code := runWithStderr(t, stderr, args...)
		said, _ := os.ReadFile(stderr.Name())
		stderr.Close()
		if code != exitUsage || strings.Contains(string(said), "no demosvc store") || strings.Contains(string(said), "no data dir") {
			t.Errorf("demosvc %s: exit %d, %q; want exit 2 naming the argument", strings.Join(args, " "), code, said)
		}
	}
	if out, code := runWithStderr(t, nil, "version", "--help"); code != exitOK || !strings.HasPrefix(out, "usage: demosvc version") {
		t.Errorf("version --help: exit %d, %q", code, out)
	}
}

// http.max_header_bytes bounds the headers as served: over HTTP/1.1
// net/http reads up to 4 KiB more (the request line among it) before it
// answers 431.
func TestHeaderBlocksOverMaxHeaderBytesAre431(t *testing.T) {
	data := t.TempDir()
	serveInProcess(t, data, map[string]string{"DEMOSVC_HTTP_MAX_HEADER_BYTES": "16384"})
	url, _ := serverReady(data)
	status := func(size int) int {
		// The request line and Host come to about 60 bytes beside X-Pad.
		req, _ := http.NewRequest("GET", url+"/healthz", nil)
		req.Header.Set("X-Pad", strings.Repeat("a", size))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := status(16000); got != http.StatusOK {
		t.Errorf("headers of about 16,060 bytes: %d, want 200", got)
	}
	if got := status(20500); got != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("headers of about 20,560 bytes: %d, want 431", got)
	}
}

package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/rogpeppe/go-internal/testscript"

	"demosvc/eventlog"
)

var update = flag.Bool("update", false, "rewrite the golden sections of testdata/script/*.txtar")

func TestMain(m *testing.M) {
	testscript.Main(waitingScripts{m}, map[string]func(){
		"demosvc": func() {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			code := run(ctx, os.Args, os.Getenv, os.Stdin, os.Stdout, os.Stderr)
			stop()
			os.Exit(code)
		},
	})
}

// scriptParallel is how many scripts run at once unless -parallel says:
// a script spends most of its time waiting for the server it started (its
// fsyncs, its start-up, a receiver), so two at a time, GOMAXPROCS on the
// development machine, leaves the cores idle.
const scriptParallel = 6

// waitingScripts runs the tests with -parallel scriptParallel when the
// command line does not set it.
type waitingScripts struct{ m *testing.M }

func (w waitingScripts) Run() int {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		flag.Set("test.parallel", strconv.Itoa(scriptParallel))
	}
	return w.m.Run()
}

// TestScripts runs testdata/script/*.txtar: the binary as users run it.
// Run with -update to rewrite golden sections after an intended change.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/script",
		UpdateScripts:       *update,
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
		Setup: func(env *testscript.Env) error {
			// Every command of a script uses $WORK/data unless told otherwise.
			env.Setenv("DEMOSVC_DATA_DIR", filepath.Join(env.WorkDir, "data"))
			// The dashboard's first-admin setup link is one more event at
			// bootstrap, which would shift every seeded id in the API's
			// golden files; scripts about the dashboard turn it back on.
			env.Setenv("DEMOSVC_DASHBOARD_ENABLED", "false")
			return nil
		},
		// [root]: the script runs as root, which can give a file to
		// another user.
		Condition: func(cond string) (bool, error) {
			if cond == "root" {
				return os.Geteuid() == 0, nil
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"waitserver": cmdWaitServer,
			"http":       cmdHTTP,
			"tamper":     cmdTamper,
			"droplog":    cmdDropLog,
			"copysnap":   cmdCopySnapshot,
			"jsonvar":    cmdJSONVar,
			"receiver":   cmdReceiver,
			"received":   cmdReceived,
			"held":       cmdHeld,
			"release":    cmdRelease,
			"waithttp":   cmdWaitHTTP,
			"waitfile":   cmdWaitFile,
		},
	})
}

// waitserver [DATADIR] waits until the server on DATADIR (default
// $DEMOSVC_DATA_DIR) answers /healthz and /readyz, then sets $URL to its
// base address.
func cmdWaitServer(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) > 1 {
		ts.Fatalf("usage: waitserver [datadir]")
	}
	dir := ts.Getenv("DEMOSVC_DATA_DIR")
	if len(args) == 1 {
		dir = ts.MkAbs(args[0])
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if url, ok := serverReady(dir); ok {
			ts.Setenv("URL", url)
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("server on %s not ready after 30s", dir)
		}
		time.Sleep(20 * time.Millisecond) // polling interval, not synchronisation
	}
}

func serverReady(dir string) (string, bool) {
	b, err := os.ReadFile(filepath.Join(dir, serveInfoFile))
	if err != nil {
		return "", false
	}
	var info serveInfo
	if json.Unmarshal(b, &info) != nil {
		return "", false
	}
	url := "http://" + info.Listen
	resp, err := http.Get(url + "/readyz")
	if err != nil {
		return "", false
	}
	resp.Body.Close()
	return url, resp.StatusCode == http.StatusOK
}

// http [-H 'Name: value']... [-key KEY] [-show Name,Name] [-repeat N] METHOD PATH [BODY]
//
// sends a request to $URL+PATH and prints the status line, the headers
// named by -show (in that order), a blank line and the body. BODY starting
// with @ names a file; {n} in it becomes the request's number (0, 1, …).
// -key KEY sends Authorization: Bearer KEY. With -repeat N it sends N requests, prints a line
// "statuses: 200 x59, 429 x1" and then the last response. `! http`
// expects the (last) status to be non-2xx.
func cmdHTTP(ts *testscript.TestScript, neg bool, args []string) {
	var headers [][2]string
	var show []string
	repeat := 1
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		if len(args) < 2 {
			ts.Fatalf("usage: http [-H 'Name: value']... [-show Names] METHOD PATH [BODY]")
		}
		switch args[0] {
		case "-H":
			name, value, ok := strings.Cut(args[1], ":")
			if !ok {
				ts.Fatalf("-H wants 'Name: value', got %q", args[1])
			}
			headers = append(headers, [2]string{strings.TrimSpace(name), strings.TrimSpace(value)})
		case "-show":
			show = strings.Split(args[1], ",")
		case "-key":
			headers = append(headers, [2]string{"Authorization", "Bearer " + args[1]})
		case "-repeat":
			n, err := strconv.Atoi(args[1])
			if err != nil || n < 1 {
				ts.Fatalf("-repeat wants a positive count")
			}
			repeat = n
		default:
			ts.Fatalf("unknown flag %s", args[0])
		}
		args = args[2:]
	}
	if len(args) < 2 || len(args) > 3 {
		ts.Fatalf("usage: http [-H 'Name: value']... [-show Names] METHOD PATH [BODY]")
	}
	var body string
	if len(args) == 3 {
		body = args[2]
		if strings.HasPrefix(body, "@") {
			body = ts.ReadFile(body[1:])
		}
	}
	var resp *http.Response
	var respBody []byte
	var statuses []int
	for i := 0; i < repeat; i++ {
		var rd io.Reader
		if len(args) == 3 {
			rd = strings.NewReader(strings.ReplaceAll(body, "{n}", strconv.Itoa(i)))
		}
		req, err := http.NewRequest(args[0], ts.Getenv("URL")+args[1], rd)
		ts.Check(err)
		for _, h := range headers {
			req.Header.Add(h[0], h[1])
		}
		resp, err = http.DefaultClient.Do(req)
		ts.Check(err)
		respBody, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		ts.Check(err)
		statuses = append(statuses, resp.StatusCode)
		if err := checkOpenAPI(req, body, resp, respBody); err != nil {
			ts.Fatalf("%s %s: response does not match openapi.yaml: %v", req.Method, args[1], err)
		}
	}
	var out bytes.Buffer
	if repeat > 1 {
		out.WriteString("statuses: " + countRuns(statuses) + "\n")
	}
	fmt.Fprintf(&out, "%s %s\n", resp.Proto, resp.Status)
	for _, name := range show {
		for _, v := range resp.Header.Values(name) {
			fmt.Fprintf(&out, "%s: %s\n", http.CanonicalHeaderKey(name), v)
		}
	}
	out.WriteString("\n")
	out.Write(respBody)
	ts.Stdout().Write(out.Bytes())
	ok := resp.StatusCode >= 200 && resp.StatusCode < 300
	if ok == neg {
		ts.Fatalf("status %s (negated: %v)", resp.Status, neg)
	}
}

// countRuns summarises statuses in order of first appearance: "200 x60, 429 x1".
func countRuns(statuses []int) string {
	var order []int
	count := map[int]int{}
	for _, s := range statuses {
		if count[s] == 0 {
			order = append(order, s)
		}
		count[s]++
	}
	parts := make([]string, len(order))
	for i, s := range order {
		parts[i] = fmt.Sprintf("%d x%d", s, count[s])
	}
	return strings.Join(parts, ", ")
}

// jsonvar VAR PATH sets $VAR to the string at PATH (dotted, with indexes:
// data.0.id) of the JSON the previous command printed on stdout (for http,
// the response body).
func cmdJSONVar(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: jsonvar VAR FIELD")
	}
	out := ts.ReadFile("stdout")
	if strings.HasPrefix(out, "HTTP/") {
		// An http command's output: the body follows the blank line.
		if _, body, ok := strings.Cut(out, "\n\n"); ok {
			out = body
		}
	}
	var v any
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		ts.Fatalf("stdout is not JSON: %v", err)
	}
	for _, part := range strings.Split(args[1], ".") {
		switch t := v.(type) {
		case map[string]any:
			v = t[part]
		case []any:
			i, err := strconv.Atoi(part)
			if err != nil || i < 0 || i >= len(t) {
				ts.Fatalf("no element %q in %s", part, args[1])
			}
			v = t[i]
		default:
			ts.Fatalf("no field %q in %s", part, args[1])
		}
	}
	str, ok := v.(string)
	if !ok {
		ts.Fatalf("stdout has no string at %q", args[1])
	}
	ts.Setenv(args[0], str)
}

// openPebble opens the Pebble store of the data dir dir, which must hold
// one, as the script commands that edit it behind demosvc's back do.
func openPebble(ts *testscript.TestScript, dir string) *pebble.DB {
	db, err := pebble.Open(filepath.Join(ts.MkAbs(dir), eventlog.PebbleDir), &pebble.Options{ErrorIfNotExists: true})
	ts.Check(err)
	return db
}

// tamper DATADIR SEQ flips one byte in the middle of the stored record SEQ,
// as someone editing the store behind demosvc's back would.
func cmdTamper(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: tamper datadir seq")
	}
	seq, err := strconv.ParseUint(args[1], 10, 64)
	ts.Check(err)
	db := openPebble(ts, args[0])
	defer db.Close()
	key := make([]byte, 9)
	key[0] = 'l'
	binary.BigEndian.PutUint64(key[1:], seq)
	v, closer, err := db.Get(key)
	ts.Check(err)
	bad := append([]byte(nil), v...)
	closer.Close()
	bad[len(bad)/2] ^= 0x20
	ts.Check(db.Set(key, bad, pebble.Sync))
}

// droplog DATADIR FROM deletes the stored records from seq FROM on, as
// someone cutting the log short behind demosvc's back would (with the head
// mark removed too, nothing but the snapshot remembers them).
func cmdDropLog(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: droplog datadir from")
	}
	from, err := strconv.ParseUint(args[1], 10, 64)
	ts.Check(err)
	db := openPebble(ts, args[0])
	defer db.Close()
	start := binary.BigEndian.AppendUint64([]byte{'l'}, from)
	ts.Check(db.DeleteRange(start, []byte{'l' + 1}, pebble.Sync))
}

// copysnap FROM TO replaces the state snapshot stored in data dir TO with
// the one in FROM: a snapshot taken from another log.
func cmdCopySnapshot(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: copysnap fromdatadir todatadir")
	}
	from, to := openPebble(ts, args[0]), openPebble(ts, args[1])
	defer from.Close()
	defer to.Close()
	lo, hi := []byte{eventlog.KeyspaceSnapshot}, []byte{eventlog.KeyspaceSnapshot + 1}
	b := to.NewBatch()
	ts.Check(b.DeleteRange(lo, hi, nil))
	it, err := from.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	ts.Check(err)
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		ts.Check(b.Set(it.Key(), it.Value(), nil))
		n++
	}
	ts.Check(it.Close())
	if n == 0 {
		ts.Fatalf("%s holds no snapshot", args[0])
	}
	ts.Check(b.Commit(pebble.Sync))
}

// scriptReceivers are the webhook receivers scripts start, by script and
// name.
var scriptReceivers sync.Map // string -> *scriptReceiver

type scriptReceiver struct {
	mu       sync.Mutex
	bodies   []string // of the requests answered, in order
	statuses []int
	hold     bool          // requests wait for release
	released chan struct{} // closed by release
	held     int           // requests waiting now
	release  func()
}

// receiver [-hold] NAME [STATUS...] starts a webhook receiver on 127.0.0.1
// that answers the statuses in turn (the last one from then on; 200 by
// default), and sets $NAME to its URL. With -hold it answers nothing until
// `release NAME`; a held request whose sender goes away is not counted.
func cmdReceiver(ts *testscript.TestScript, neg bool, args []string) {
	hold := len(args) > 0 && args[0] == "-hold"
	if hold {
		args = args[1:]
	}
	if neg || len(args) < 1 {
		ts.Fatalf("usage: receiver [-hold] NAME [STATUS...]")
	}
	rv := &scriptReceiver{statuses: []int{200}, hold: hold, released: make(chan struct{})}
	if len(args) > 1 {
		rv.statuses = nil
		for _, a := range args[1:] {
			n, err := strconv.Atoi(a)
			ts.Check(err)
			rv.statuses = append(rv.statuses, n)
		}
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if rv.hold {
			rv.mu.Lock()
			rv.held++
			rv.mu.Unlock()
			var gone bool
			select {
			case <-rv.released:
			case <-r.Context().Done():
				gone = true
			}
			rv.mu.Lock()
			rv.held--
			rv.mu.Unlock()
			if gone {
				return
			}
		}
		rv.mu.Lock()
		i := len(rv.bodies)
		rv.bodies = append(rv.bodies, string(body))
		status := rv.statuses[min(i, len(rv.statuses)-1)]
		rv.mu.Unlock()
		w.WriteHeader(status)
	}))
	var release sync.Once
	ts.Defer(func() {
		release.Do(func() { close(rv.released) }) // Close waits for held requests
		srv.Close()
	})
	rv.release = func() { release.Do(func() { close(rv.released) }) }
	scriptReceivers.Store(ts.Getenv("WORK")+"/"+args[0], rv)
	ts.Setenv(args[0], srv.URL)
}

// scriptReceiverNamed returns the receiver a script started as name.
func scriptReceiverNamed(ts *testscript.TestScript, name string) *scriptReceiver {
	v, ok := scriptReceivers.Load(ts.Getenv("WORK") + "/" + name)
	if !ok {
		ts.Fatalf("no receiver %s", name)
	}
	return v.(*scriptReceiver)
}

// held NAME N waits until receiver NAME (started with -hold) holds N
// requests at once.
func cmdHeld(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: held NAME N")
	}
	rv := scriptReceiverNamed(ts, args[0])
	n, err := strconv.Atoi(args[1])
	ts.Check(err)
	deadline := time.Now().Add(30 * time.Second)
	for {
		rv.mu.Lock()
		held := rv.held
		rv.mu.Unlock()
		if held >= n {
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("receiver %s holds %d requests after 30s, want %d", args[0], held, n)
		}
		time.Sleep(10 * time.Millisecond) // polling interval, not synchronisation
	}
}

// release NAME makes receiver NAME answer the requests it holds, and every
// later one at once.
func cmdRelease(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: release NAME")
	}
	scriptReceiverNamed(ts, args[0]).release()
}

// received [-distinct] NAME N waits until receiver NAME answered N
// requests (N different bodies with -distinct), then prints their bodies,
// one a line, in the order they were answered.
func cmdReceived(ts *testscript.TestScript, neg bool, args []string) {
	distinct := len(args) > 0 && args[0] == "-distinct"
	if distinct {
		args = args[1:]
	}
	if neg || len(args) != 2 {
		ts.Fatalf("usage: received [-distinct] NAME N")
	}
	rv := scriptReceiverNamed(ts, args[0])
	n, err := strconv.Atoi(args[1])
	ts.Check(err)
	deadline := time.Now().Add(30 * time.Second)
	for {
		rv.mu.Lock()
		got := append([]string(nil), rv.bodies...)
		rv.mu.Unlock()
		count := len(got)
		if distinct {
			set := map[string]bool{}
			for _, b := range got {
				set[b] = true
			}
			count = len(set)
		}
		if count >= n {
			fmt.Fprintln(ts.Stdout(), strings.Join(got, "\n"))
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("receiver %s answered %d requests (%d counted) in 30s, want %d", args[0], len(got), count, n)
		}
		time.Sleep(10 * time.Millisecond) // polling interval, not synchronisation
	}
}

// waithttp -key KEY PATH REGEXP polls GET $URL+PATH until the body matches.
func cmdWaitHTTP(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 4 || args[0] != "-key" {
		ts.Fatalf("usage: waithttp -key KEY PATH REGEXP")
	}
	re, err := regexp.Compile(args[3])
	ts.Check(err)
	deadline := time.Now().Add(30 * time.Second)
	for {
		req, _ := http.NewRequest("GET", ts.Getenv("URL")+args[2], nil)
		req.Header.Set("Authorization", "Bearer "+args[1])
		resp, err := http.DefaultClient.Do(req)
		ts.Check(err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if re.Match(body) {
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("GET %s never matched %s; last: %s", args[2], args[3], body)
		}
		time.Sleep(10 * time.Millisecond) // polling interval, not synchronisation
	}
}

// waitfile FILE REGEXP waits until FILE exists and its content matches
// REGEXP (30 s at most).
func cmdWaitFile(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: waitfile FILE REGEXP")
	}
	re, err := regexp.Compile(args[1])
	ts.Check(err)
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, _ := os.ReadFile(ts.MkAbs(args[0]))
		if re.Match(b) {
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("%s never matched %s; last: %q", args[0], args[1], b)
		}
		time.Sleep(10 * time.Millisecond) // polling interval, not synchronisation
	}
}

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
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/rogpeppe/go-internal/testscript"

	"demosvc/eventlog"
)

var update = flag.Bool("update", false, "rewrite the golden sections of testdata/script/*.txtar")

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"demosvc": func() {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			code := run(ctx, os.Args, os.Getenv, os.Stdin, os.Stdout, os.Stderr)
			stop()
			os.Exit(code)
		},
	})
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
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"waitserver": cmdWaitServer,
			"http":       cmdHTTP,
			"tamper":     cmdTamper,
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

// http [-H 'Name: value']... [-show Name,Name] METHOD PATH [BODY]
//
// sends a request to $URL+PATH and prints the status line, the headers
// named by -show (in that order), a blank line and the body. BODY starting
// with @ names a file. `! http` expects a non-2xx status.
func cmdHTTP(ts *testscript.TestScript, neg bool, args []string) {
	var headers [][2]string
	var show []string
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
		default:
			ts.Fatalf("unknown flag %s", args[0])
		}
		args = args[2:]
	}
	if len(args) < 2 || len(args) > 3 {
		ts.Fatalf("usage: http [-H 'Name: value']... [-show Names] METHOD PATH [BODY]")
	}
	var body io.Reader
	if len(args) == 3 {
		b := args[2]
		if strings.HasPrefix(b, "@") {
			b = ts.ReadFile(b[1:])
		}
		body = strings.NewReader(b)
	}
	req, err := http.NewRequest(args[0], ts.Getenv("URL")+args[1], body)
	ts.Check(err)
	for _, h := range headers {
		req.Header.Add(h[0], h[1])
	}
	resp, err := http.DefaultClient.Do(req)
	ts.Check(err)
	defer resp.Body.Close()
	respBody, err := io.ReadAll(resp.Body)
	ts.Check(err)
	var out bytes.Buffer
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

// tamper DATADIR SEQ flips one byte in the middle of the stored record SEQ,
// as someone editing the store behind demosvc's back would.
func cmdTamper(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: tamper datadir seq")
	}
	seq, err := strconv.ParseUint(args[1], 10, 64)
	ts.Check(err)
	db, err := pebble.Open(filepath.Join(ts.MkAbs(args[0]), eventlog.PebbleDir), &pebble.Options{ErrorIfNotExists: true})
	ts.Check(err)
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

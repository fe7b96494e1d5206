// Command demosvc is the Demo Session and Agent Service: one static binary,
// one data directory. See README.md.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "0.1.0-dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args, os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Exit codes.
const (
	exitOK    = 0
	exitFail  = 1 // the command ran and failed
	exitUsage = 2 // the command line was wrong
)

const usage = `usage: demosvc <command> [flags]

commands:
  serve [--config FILE] [--data DIR] [--listen ADDR] [--new-master-key]
  log [--from SEQ] [--type T]... [--account ACC_ID] [--follow]
  log verify [--snapshot=false] [--expect-head SEQ:HASH]
  log export [--from SEQ]
  log import [--redeliver] FILE     FILE "-" reads standard input
  accounts create --name NAME [--plan starter|pro|enterprise] [--rpm N]
  accounts list
  keys create --account ACC_ID      prints the key once
  keys list [--account ACC_ID]
  keys revoke KEY_ID
  users create --account ACC_ID --email E [--role viewer|admin]   prints a one-time setup link
  users list [--account ACC_ID]
  users reset-password USER_ID      prints a one-time setup link
  users disable USER_ID
  backup [--with-master-key] DIR    a consistent copy, also while serve runs
  cluster status                    this node's view of the cluster (cluster.enabled)
  version

Every command takes --config FILE and --data DIR (default ./data).
`

// run is the whole program: main only supplies the process's context,
// arguments, environment and standard streams, so tests can call it.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) (code int) {
	defer func() {
		// A bug must not greet a user with a goroutine dump: one line that
		// says what happened, and a failing exit code.
		if r := recover(); r != nil {
			fmt.Fprintf(stderr, "demosvc: internal error: %v\n(this is a bug in demosvc: please report it with the command that caused it)\n", r)
			code = exitFail
		}
	}()
	out := &outWriter{w: stdout}
	c := &cli{ctx: ctx, getenv: getenv, stdin: stdin, stdout: out, stderr: stderr}
	// What a command prints is its result (an export, a key shown once,
	// its help): one that could not all be written is a failure, not an
	// exit 0 over a cut file. A serve's output is the first key, which it
	// logs an error about; its exit says how it stopped.
	defer func() {
		if len(args) > 1 && args[1] == "serve" && !c.helped {
			return
		}
		if err := out.finish(); err != nil && code == exitOK {
			fmt.Fprintf(stderr, "demosvc: writing the output: %v\n", err)
			code = exitFail
		}
	}()
	if len(args) < 2 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	cmd, rest := args[1], args[2:]
	switch cmd {
	case "serve":
		return c.serve(rest)
	case "log":
		return c.log(rest)
	case "accounts":
		return c.accounts(rest)
	case "keys":
		return c.keys(rest)
	case "users":
		return c.users(rest)
	case "backup":
		return c.backup(rest)
	case "cluster":
		return c.cluster(rest)
	case "version", "--version":
		return c.version(rest)
	case "help", "-h", "--help":
		fmt.Fprint(c.stdout, usage)
		return exitOK
	default:
		fmt.Fprintf(stderr, "demosvc: unknown command %q\n\n%s", cmd, usage)
		return exitUsage
	}
}

// outWriter is a command's standard output: it keeps the first write
// error, and after it writes nothing more, so that a stream being copied
// out stops.
type outWriter struct {
	w   io.Writer
	err error
}

func (o *outWriter) Write(p []byte) (int, error) {
	if o.err != nil {
		return 0, o.err
	}
	n, err := o.w.Write(p)
	o.err = err
	return n, err
}

// finish returns the first write error, or, when the output is a regular
// file, the error of syncing it: a file system may take a write and only
// find at the sync that it has no room for it.
func (o *outWriter) finish() error {
	if o.err != nil {
		return o.err
	}
	if f, ok := o.w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
			if err := f.Sync(); err != nil {
				o.err = err
			}
		}
	}
	return o.err
}

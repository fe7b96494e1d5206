package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"demosvc/config"
	"demosvc/eventlog"
	demohttp "demosvc/http"
	"demosvc/projections"
)

// cli carries the process's context, environment and standard streams to
// every command, and what the command line of the command running said.
type cli struct {
	ctx            context.Context
	getenv         func(string) string
	stdin          io.Reader
	stdout, stderr io.Writer

	args   []string // the positional arguments parse found
	helped bool     // parse printed help: the command exits 0
}

// commonFlags are the flags every command takes, and serve's --listen.
type commonFlags struct {
	name       string // the command, for messages: "log verify"
	configFile string
	dataDir    string
	listen     string
}

// commandHelp is each command's positional arguments and what it does, for
// its --help.
var commandHelp = map[string][2]string{
	"serve":                {"", "Serve the API (and deliver webhooks) from the data dir."},
	"log":                  {"", "Print the log as JSON lines. Subcommands: verify, export, import."},
	"log verify":           {"", "Recompute the hash chain; exit 1 naming the first bad seq."},
	"log export":           {"", "Write the log as JSON lines with hashes and sealed values."},
	"log import":           {"FILE", "Load an export or a hand-written fixture into a new data dir (FILE - reads standard input)."},
	"accounts create":      {"", "Create an account."},
	"accounts list":        {"", "List the accounts with the rate limit in force."},
	"keys create":          {"", "Create an API key for an account; it is printed once."},
	"keys list":            {"", "List API keys (never the keys themselves)."},
	"keys revoke":          {"KEY_ID", "Revoke an API key: it gets 401 from then on."},
	"users create":         {"", "Create a dashboard user and print a one-time setup link."},
	"users list":           {"", "List dashboard users."},
	"users reset-password": {"USER_ID", "Print a new one-time setup link; the password and sessions stay until it is used (users disable ends them now)."},
	"users disable":        {"USER_ID", "Disable a user: their sessions end, they can never sign in again."},
	"backup":               {"DIR", "Write a consistent copy of the data dir to DIR, also while serve runs."},
	"cluster status":       {"", "Print the running node's view of the cluster: roles, leases, applied seq, lag."},
}

// commandGroups lists the subcommands of each command that has them.
var commandGroups = map[string][]string{
	"accounts": {"create", "list"},
	"cluster":  {"status"},
	"keys":     {"create", "list", "revoke"},
	"log":      {"verify", "export", "import"},
	"users":    {"create", "list", "reset-password", "disable"},
}

// flagSet returns a flag set for command name with --config and --data.
func (c *cli) flagSet(name string) (*flag.FlagSet, *commonFlags) {
	cf := &commonFlags{name: name}
	fs := flag.NewFlagSet("demosvc "+name, flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	fs.Func("config", "YAML configuration `file`", nonEmpty(&cf.configFile))
	fs.Func("data", "data `dir` (default ./data)", nonEmpty(&cf.dataDir))
	fs.Usage = func() {
		h := commandHelp[name]
		synopsis := "demosvc " + name + " [flags]"
		if h[0] != "" {
			synopsis += " " + h[0]
		}
		fmt.Fprintf(fs.Output(), "usage: %s\n", synopsis)
		if h[1] != "" {
			fmt.Fprintf(fs.Output(), "\n%s\n", h[1])
		}
		if subs := commandGroups[name]; len(subs) > 0 {
			fmt.Fprintf(fs.Output(), "\nsubcommands: %s (demosvc %s SUBCOMMAND --help)\n", strings.Join(subs, ", "), name)
		}
		fmt.Fprintln(fs.Output(), "\nflags (before or after the arguments):")
		fs.PrintDefaults()
	}
	return fs, cf
}

// nonEmpty sets *dst to a flag's value and refuses an empty one: `--data
// ""` (an unset variable in a script) would otherwise mean the default,
// and the command would act on ./data (`--config ""`: on no config).
func nonEmpty(dst *string) func(string) error {
	return func(v string) error {
		if v == "" {
			return errors.New("empty")
		}
		*dst = v
		return nil
	}
}

// parse parses args, flags and positional arguments in any order (a "--"
// ends the flags), into fs and c.args. It returns false after printing why
// on a usage error, which includes a number of positional arguments other
// than want, and after printing the command's help for -h or --help; the
// command then returns c.usageExit().
func (c *cli) parse(fs *flag.FlagSet, args []string, want int) bool {
	c.helped = false
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "-h" || a == "-help" || a == "--help" {
			fs.SetOutput(c.stdout)
			fs.Usage()
			fs.SetOutput(c.stderr)
			c.helped = true
			return false
		}
	}
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return false
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		// flag.Parse stops at the first argument that is not a flag, and
		// consumes a "--" without a trace: if one stood just before rest,
		// everything left is an argument.
		if i := len(args) - len(rest) - 1; i >= 0 && args[i] == "--" {
			pos = append(pos, rest...)
			break
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
	if len(pos) != want {
		fmt.Fprintf(c.stderr, "%s: expected %d argument(s), got %q\n", fs.Name(), want, pos)
		fs.Usage()
		return false
	}
	// No argument may be empty: `backup "$DIR"` with DIR unset would
	// otherwise write into the working directory.
	for i, a := range pos {
		if a == "" {
			fmt.Fprintf(c.stderr, "%s: argument %d is empty\n", fs.Name(), i+1)
			return false
		}
	}
	c.args = pos
	return true
}

// version prints the binary's version; it takes no argument.
func (c *cli) version(args []string) int {
	fs := flag.NewFlagSet("demosvc version", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	fs.Usage = func() { fmt.Fprint(fs.Output(), "usage: demosvc version\n\nPrints the binary's version.\n") }
	if !c.parse(fs, args, 0) {
		return c.usageExit()
	}
	fmt.Fprintf(c.stdout, "demosvc %s\n", version)
	return exitOK
}

// usageExit is the exit code after parse returned false: 0 when it printed
// the help asked for, 2 for a wrong command line.
func (c *cli) usageExit() int {
	if c.helped {
		return exitOK
	}
	return exitUsage
}

// groupHelp answers `demosvc GROUP --help` (exit 0) and a group command
// without a known subcommand (exit 2), listing the subcommands.
func (c *cli) groupHelp(group string, args []string) int {
	w, code := c.stderr, exitUsage
	if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help") {
		w, code = c.stdout, exitOK
	} else if len(args) == 0 {
		fmt.Fprintf(w, "demosvc %s: expected a subcommand\n", group)
	} else {
		fmt.Fprintf(w, "demosvc %s: unknown subcommand %q\n", group, args[0])
	}
	fmt.Fprintf(w, "usage: demosvc %s SUBCOMMAND [flags] [arguments]\n\nsubcommands:\n", group)
	for _, sub := range commandGroups[group] {
		h := commandHelp[group+" "+sub]
		fmt.Fprintf(w, "  %-8s %-8s %s\n", sub, h[0], h[1])
	}
	fmt.Fprintf(w, "\ndemosvc %s SUBCOMMAND --help shows its flags.\n", group)
	return code
}

// config loads the configuration for a command: defaults < --config file <
// DEMOSVC_* environment < flags.
func (c *cli) config(cf *commonFlags) (*config.Config, error) {
	flags := map[string]string{}
	if cf.dataDir != "" {
		flags["data_dir"] = cf.dataDir
	}
	if cf.listen != "" {
		flags["listen"] = cf.listen
	}
	return config.Load(config.Sources{File: cf.configFile, Getenv: c.getenv, Environ: c.environ(), Flags: flags})
}

// environ is the process environment as this command sees it: the
// variables getenv answers (all of them in the binary, where getenv is
// os.Getenv; a test's own getenv hides the test process's variables).
func (c *cli) environ() []string {
	var out []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if v := c.getenv(name); v != "" {
			out = append(out, name+"="+v)
		}
	}
	return out
}

// fail reports a failed command on stderr and returns exitFail.
func (c *cli) fail(cf *commonFlags, format string, args ...any) int {
	fmt.Fprintf(c.stderr, "demosvc %s: %s\n", cf.name, fmt.Sprintf(format, args...))
	return exitFail
}

// newIDs returns the id source, which carries the clock: real ones, or the
// deterministic ones that testing.seed and testing.clock ask for.
func newIDs(cfg *config.Config) *eventlog.IDs {
	clock := eventlog.Clock(time.Now)
	if cfg.Testing.Clock != "" {
		t, _ := time.Parse(time.RFC3339, cfg.Testing.Clock) // validated by config
		clock = eventlog.FixedClock(t)
	}
	if cfg.Testing.Seed != 0 {
		return eventlog.NewSeededIDs(clock, cfg.Testing.Seed)
	}
	return eventlog.NewIDs(clock)
}

// reseedAfterOpen makes a seeded id source depend on the log's head, so
// that each run of a test-mode process mints ids no earlier run minted.
func reseedAfterOpen(cfg *config.Config, ids *eventlog.IDs, log *eventlog.Log) {
	if cfg.Testing.Seed != 0 {
		ids.Reseed(cfg.Testing.Seed*1_000_003 + int64(log.DurableSeq()))
	}
}

// lockMessage explains a data dir held by another process, naming the
// running server when it left its serve.json. A serve.json whose process
// is gone (a server killed with SIGKILL leaves it behind) is not trusted:
// the holder is another process, such as a `demosvc log --follow`, and an
// operator told to stop a dead server's pid could stop whatever reuses it.
func lockMessage(dataDir string) string {
	if info, ok := runningServe(dataDir); ok {
		return fmt.Sprintf("data dir %s is in use by demosvc serve (pid %d, listening on %s since %s)",
			dataDir, info.PID, info.Listen, info.StartedAt.Format(time.RFC3339))
	}
	return fmt.Sprintf("data dir %s is in use by another process", dataDir)
}

// runningServe returns what serve.json says of the serve that wrote it,
// if that process still runs.
func runningServe(dataDir string) (serveInfo, bool) {
	var info serveInfo
	b, err := os.ReadFile(filepath.Join(dataDir, serveInfoFile))
	ok := err == nil && json.Unmarshal(b, &info) == nil && info.PID != 0 && processRuns(info.PID)
	return info, ok
}

// processRuns reports whether a process with pid exists. Where a signal
// cannot tell (not on Unix), it says yes.
func processRuns(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	return !errors.Is(p.Signal(syscall.Signal(0)), os.ErrProcessDone)
}

// openError turns a failure to open the data dir into one clear sentence.
func openError(dataDir string, err error) string {
	switch {
	case errors.Is(err, eventlog.ErrLocked):
		return lockMessage(dataDir)
	default:
		return err.Error()
	}
}

// quietLogger discards Pebble's chatter in short-lived CLI commands.
func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// localData is a data dir opened by a CLI process while no server runs.
type localData struct {
	store *eventlog.Store
	log   *eventlog.Log
	state *projections.Projections
}

// openLocal opens the data dir; withState also rebuilds the projections,
// which the log commands do without so that they work on a damaged log.
//
// With create, a data dir that does not exist yet is created: accounts
// create does, so that a self-hoster can set up accounts before the first
// serve (createsDataDir).
func openLocal(cfg *config.Config, withState, create bool) (*localData, error) {
	if err := checkOwner(cfg.DataDir, true); err != nil {
		return nil, err
	}
	store, err := eventlog.OpenStore(cfg.DataDir, eventlog.StoreOptions{Create: create, Logger: quietLogger()})
	if err != nil {
		return nil, err
	}
	ids := newIDs(cfg)
	log, err := eventlog.OpenLog(store, eventlog.Options{Registry: projections.NewRegistry(), IDs: ids})
	if err != nil {
		store.Close()
		return nil, fmt.Errorf("data dir %s: %w", cfg.DataDir, err)
	}
	reseedAfterOpen(cfg, ids, log)
	d := &localData{store: store, log: log}
	if withState {
		if d.state, err = projections.Open(log, projectionOptions(cfg, nil, nil)); err != nil {
			log.Close()
			store.Close()
			return nil, fmt.Errorf("data dir %s: %w", cfg.DataDir, err)
		}
	}
	return d, nil
}

func (d *localData) close() {
	if d.state != nil {
		d.state.Close()
	}
	d.log.Close()
	d.store.Close()
}

// admin runs one admin request: through the running server's socket if one
// answers, otherwise in this process against the data dir. The response
// body goes to out; the HTTP status is returned.
func (c *cli) admin(cfg *config.Config, method, target string, body io.Reader, out io.Writer) (status int, err error) {
	defer func() {
		switch {
		case c.ctx.Err() == nil:
		case strings.Contains(target, "follow=true"):
			err = nil // following ends at an interrupt, as it should
		default:
			// Interrupted (SIGINT, SIGTERM): whatever the answer says,
			// it is cut short, and the command must not exit 0.
			err = errInterrupted
		}
	}()
	status, err = demohttp.DoSocket(c.ctx, cfg.DataDir, method, target, body, out)
	if !errors.Is(err, demohttp.ErrNoServer) {
		return status, err
	}
	if target == "/admin/cluster" {
		// Only a running node knows the cluster: no need to open the
		// data dir (and replay its state) to say so.
		if !eventlog.HoldsStore(cfg.DataDir) {
			return 0, eventlog.NoStoreError(cfg.DataDir)
		}
		return 0, fmt.Errorf("no demosvc serve is running on %s: cluster status asks a running node (start it, or ask another node)", cfg.DataDir)
	}
	// The log commands and backup work without the state: they must work
	// on a damaged log, and need not wait for a replay.
	d, err := openLocal(cfg, !strings.HasPrefix(target, "/admin/log") && !strings.HasPrefix(target, "/admin/backup"),
		createsDataDir(method, target))
	if err != nil {
		if errors.Is(err, eventlog.ErrLocked) {
			if _, serving := runningServe(cfg.DataDir); !serving {
				// Another command that opens the data dir itself (log
				// --follow, an import, a backup with no server) holds it.
				return 0, fmt.Errorf("%s (another demosvc command that opened it itself, such as log --follow or log import "+
					"with no server running, holds it while it runs); retry when it has ended", lockMessage(cfg.DataDir))
			}
			return 0, fmt.Errorf("%s, but its admin socket %s does not answer yet: serve binds it once it has rebuilt its state "+
				"(its /readyz says starting meanwhile); retry when it is ready", lockMessage(cfg.DataDir), demohttp.SocketPath(cfg.DataDir))
		}
		return 0, err
	}
	defer d.close()
	a := &demohttp.Admin{Log: d.log, State: d.state, Config: cfg, DashboardURL: dashboardURL(cfg, cfg.Listen), Clock: newIDs(cfg).Now}
	return demohttp.DoLocal(c.ctx, a.Handler(), method, target, body, out)
}

// errInterrupted ends a command stopped by a signal before it finished.
var errInterrupted = errors.New("interrupted: what it wrote so far is incomplete")

// createsDataDir reports whether the admin request creates the data dir
// when it does not exist: only accounts create does, the first thing a new
// data dir can take (a key or a user needs an account). Any other admin
// command on a data dir that does not exist says it holds no store, and
// leaves nothing behind: a mistyped --data is not a new, empty store.
func createsDataDir(method, target string) bool {
	return method == http.MethodPost && target == "/admin/accounts"
}

// streamOut passes JSON lines through to stdout, except an {"error":…}
// line, which a stream ends with when it fails after it began: that goes to
// stderr and marks the command failed.
type streamOut struct {
	c      *cli
	cf     *commonFlags
	buf    []byte
	failed bool
	err    error // writing to standard output failed
}

func (s *streamOut) Write(p []byte) (int, error) {
	if err := s.err; err != nil {
		return 0, err // standard output failed: stop the copy
	}
	s.buf = append(s.buf, p...)
	for {
		i := bytes.IndexByte(s.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		s.line(s.buf[:i+1])
		s.buf = s.buf[i+1:]
	}
}

func (s *streamOut) line(l []byte) {
	if bytes.HasPrefix(l, []byte(`{"error":`)) {
		var e demohttp.AdminError
		_ = json.Unmarshal(l, &e)
		s.c.fail(s.cf, "%s", e.Error)
		s.failed = true
		return
	}
	if _, err := s.c.stdout.Write(l); err != nil && s.err == nil {
		s.err = fmt.Errorf("writing the output: %w", err)
	}
}

// flush writes out a last line that had no newline.
func (s *streamOut) flush() {
	if len(s.buf) > 0 {
		s.line(append(s.buf, '\n'))
		s.buf = nil
	}
}

// openInput opens the file name, or standard input for "-", and returns
// the function that closes it.
func (c *cli) openInput(name string) (io.Reader, func(), error) {
	if name == "-" {
		return bufio.NewReader(c.stdin), func() {}, nil
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, nil, err
	}
	return f, func() { f.Close() }, nil
}

// multiFlag is a repeatable string flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"demosvc/config"
	"demosvc/delivery"
	"demosvc/eventlog"
	demohttp "demosvc/http"
	"demosvc/projections"
)

// log dispatches `demosvc log` and its subcommands.
func (c *cli) log(args []string) int {
	if len(args) > 0 {
		switch args[0] {
		case "verify":
			return c.logVerify(args[1:])
		case "export":
			return c.logExport(args[1:])
		case "import":
			return c.logImport(args[1:])
		}
		if !strings.HasPrefix(args[0], "-") {
			// log itself takes no arguments: a word here is a subcommand
			// mistyped, not a data dir or a seq.
			fmt.Fprintf(c.stderr, "demosvc log: unknown subcommand %q: log shows the log (see demosvc log --help), "+
				"or runs one of verify, export, import\n", args[0])
			return exitUsage
		}
	}
	return c.logShow(args)
}

// logShow prints the log as JSON lines, optionally following it.
func (c *cli) logShow(args []string) int {
	fs, cf := c.flagSet("log")
	from := fs.Uint64("from", 0, "first `seq` to print")
	var types multiFlag
	fs.Var(&types, "type", "only events of this `type` (repeatable)")
	account := fs.String("account", "", "only events of this account `id`")
	follow := fs.Bool("follow", false, "keep printing new events as they are appended")
	if !c.parse(fs, args, 0) {
		return c.usageExit()
	}
	// Checked before the data dir is opened or a server asked, as any
	// other value out of range (the server checks the types again).
	reg := projections.NewRegistry()
	for _, t := range types {
		if !reg.Known(t) {
			fmt.Fprintf(c.stderr, "demosvc log: --type %q is not an event type; known: %v\n", t, reg.Types())
			return exitUsage
		}
	}
	if *account != "" && !strings.HasPrefix(strings.ToLower(*account), "acc_") {
		fmt.Fprintf(c.stderr, "demosvc log: --account %q is not an account id (acc_…)\n", *account)
		return exitUsage
	}
	if _, ok := projections.ParseID("acc_", strings.ToLower(*account)); ok {
		*account = strings.ToLower(*account) // as the log writes ids; the API takes either case too
	}
	cfg, err := c.config(cf)
	if err != nil {
		return c.fail(cf, "%v", err)
	}
	q := url.Values{}
	if *from > 0 {
		q.Set("from", strconv.FormatUint(*from, 10))
	}
	for _, t := range types {
		q.Add("type", t)
	}
	if *account != "" {
		q.Set("account", *account)
	}
	if *follow {
		q.Set("follow", "true")
	}
	return c.stream(cf, cfg, "/admin/log?"+q.Encode(), nil)
}

func (c *cli) logExport(args []string) int {
	fs, cf := c.flagSet("log export")
	from := fs.Uint64("from", 0, "first `seq` to export")
	if !c.parse(fs, args, 0) {
		return c.usageExit()
	}
	cfg, err := c.config(cf)
	if err != nil {
		return c.fail(cf, "%v", err)
	}
	q := url.Values{}
	if *from > 0 {
		q.Set("from", strconv.FormatUint(*from, 10))
	}
	bar := c.newProgress("export", false)
	if bar.enabled() {
		q.Set("progress", "true")
	}
	return c.stream(cf, cfg, "/admin/log/export?"+q.Encode(), bar)
}

// stream runs an admin request whose answer is JSON lines, drawing the
// progress lines it asked for on bar (nil when it asked for none).
func (c *cli) stream(cf *commonFlags, cfg *config.Config, target string, bar *progress) int {
	out := &streamOut{c: c, cf: cf}
	filter := &progressFilter{bar: bar, next: out}
	status, err := c.admin(cfg, http.MethodGet, target, nil, filter)
	filter.flush()
	if err == nil {
		out.flush() // a last line with no newline; one cut short by an interrupt is dropped
	}
	ok := err == nil && status == http.StatusOK && !out.failed
	bar.finish(ok)
	if err != nil {
		return c.fail(cf, "%v", err)
	}
	if !ok {
		return exitFail
	}
	return exitOK
}

func (c *cli) logVerify(args []string) int {
	fs, cf := c.flagSet("log verify")
	snapshot := fs.Bool("snapshot", true, "also replay the log up to the stored snapshot and check that the snapshot is that state, byte for byte (holds a second copy of the state meanwhile)")
	expect := fs.String("expect-head", "", "`SEQ:HASH` of a record kept outside the data dir (the records and head_hash an earlier verify printed): the log must still hold that record, unchanged")
	if !c.parse(fs, args, 0) {
		return c.usageExit()
	}
	if *expect != "" {
		if _, err := eventlog.ParseAnchor(*expect); err != nil {
			fmt.Fprintf(c.stderr, "log verify: --expect-head: %v\n", err)
			return exitUsage
		}
	}
	cfg, err := c.config(cf)
	if err != nil {
		return c.fail(cf, "%v", err)
	}
	var body bytes.Buffer
	bar := c.newProgress("verify", false)
	q := url.Values{}
	if bar.enabled() {
		q.Set("progress", "true")
	}
	if !*snapshot {
		q.Set("snapshot", "false")
	}
	if *expect != "" {
		q.Set("expect_head", *expect)
	}
	target := "/admin/log/verify"
	if len(q) > 0 {
		target += "?" + q.Encode()
	}
	filter := &progressFilter{bar: bar, next: &body}
	status, err := c.admin(cfg, http.MethodGet, target, nil, filter)
	filter.flush()
	bar.finish(err == nil && bytes.HasPrefix(body.Bytes(), []byte(`{"ok":true`)))
	if errors.Is(err, eventlog.ErrDamaged) || errors.Is(err, eventlog.ErrCorrupt) {
		// The log could not even be opened: that is verify's answer too.
		res := demohttp.VerifyResult{FirstBadSeq: 1, Error: err.Error()}
		var ve *eventlog.VerifyError
		if errors.As(err, &ve) {
			res.FirstBadSeq = ve.Seq
		}
		json.NewEncoder(c.stdout).Encode(res)
		return c.fail(cf, "%v", err)
	}
	if err != nil {
		return c.fail(cf, "%v", err)
	}
	var res demohttp.VerifyResult
	if json.Unmarshal(body.Bytes(), &res) != nil || (status != http.StatusOK && status != http.StatusConflict) ||
		bytes.HasPrefix(body.Bytes(), []byte(`{"error":`)) {
		var e demohttp.AdminError
		_ = json.Unmarshal(body.Bytes(), &e)
		return c.fail(cf, "%s", e.Error)
	}
	c.stdout.Write(body.Bytes())
	if !res.OK && res.FirstBadSeq == 0 {
		return c.fail(cf, "%s", res.Error)
	}
	if !res.OK {
		return c.fail(cf, "the chain breaks at seq %d: %s", res.FirstBadSeq, res.Error)
	}
	return exitOK
}

// logImport loads an export (or a hand-written fixture) into a new data dir.
// It needs the data dir to itself, so it never goes through a server.
func (c *cli) logImport(args []string) int {
	fs, cf := c.flagSet("log import")
	redeliver := fs.Bool("redeliver", false, "deliver the imported history to its webhooks again (by default they start after the imported head)")
	if !c.parse(fs, args, 1) {
		return c.usageExit()
	}
	name := c.args[0]
	cfg, err := c.config(cf)
	if err != nil {
		return c.fail(cf, "%v", err)
	}
	if _, err := demohttp.DoSocket(c.ctx, cfg.DataDir, http.MethodGet, "/admin/log/verify", nil, &bytes.Buffer{}); !errors.Is(err, demohttp.ErrNoServer) {
		return c.fail(cf, "a server is running on %s; import needs a new data dir that no server has open", cfg.DataDir)
	}
	in, done, err := c.openInput(name)
	if err != nil {
		return c.fail(cf, "%v", err)
	}
	defer done()
	if err := checkOwner(cfg.DataDir, false); err != nil {
		return c.fail(cf, "%v", err)
	}
	undo := newDirUndo(cfg.DataDir)
	store, err := eventlog.OpenStore(cfg.DataDir, eventlog.StoreOptions{Create: true, Logger: quietLogger()})
	if err != nil {
		return c.fail(cf, "%s", openError(cfg.DataDir, err))
	}
	closed := false
	defer func() {
		if !closed {
			store.Close()
		}
	}()
	reg := projections.NewRegistry()
	imported := projections.NewState()
	opts := eventlog.ImportOptions{Check: imported.Checker(reg, cfg.Delivery.AllowPrivateNetworks)}
	bar := c.newProgress("import", true)
	if bar.enabled() {
		// The bar counts bytes of the input, whose size gives the ETA (a
		// pipe has none: a rate only); the records staged are its text.
		size := inputSize(in)
		in = &countingReader{r: in, read: func(n int64) { bar.set(n, size) }}
		opts.Progress = func(records uint64) { bar.describe(fmt.Sprintf("import: %d records", records)) }
	}
	n, err := eventlog.Import(store, reg, newCtxReader(c.ctx, in), opts)
	if c.ctx.Err() != nil {
		// Interrupted, even if the input ended meanwhile: the import
		// is undone, whatever it read.
		err = errInterrupted
	}
	bar.finish(err == nil)
	if err != nil {
		// Nothing was imported: what opening the store created goes too,
		// so that the data dir is as it was (a mistyped --data is not
		// left holding a new, empty store).
		store.Close()
		closed = true
		undo.run()
	}
	var ie *eventlog.ImportError
	switch {
	case errors.Is(err, errInterrupted):
		return c.fail(cf, "interrupted: nothing was imported")
	case errors.As(err, &ie):
		return c.fail(cf, "%s line %d: %v (nothing was imported)", name, ie.Line, ie.Err)
	case err != nil:
		return c.fail(cf, "%v", err)
	}
	if !*redeliver {
		// A restored history is not sent again: every webhook starts
		// after the imported head.
		if err := delivery.StartAt(store, imported.WebhookIDs(), uint64(n)); err != nil {
			return c.fail(cf, "setting the webhooks' cursors: %v", err)
		}
	}
	if n == 0 {
		fmt.Fprintln(c.stdout, `{"imported":0}`)
		return exitOK
	}
	head, err := store.Head()
	if err != nil {
		return c.fail(cf, "reading the imported head: %v", err)
	}
	// The head's hash is the anchor of what was imported: the head_hash
	// log verify printed where the export was taken, if the file is whole
	// and unchanged.
	fmt.Fprintf(c.stdout, "{\"imported\":%d,\"head_hash\":\"%x\"}\n", n, head.Hash)
	return exitOK
}

// dirUndo removes what was created in a directory after it was made: the
// directory itself if it did not exist, else the entries it did not hold.
type dirUndo struct {
	dir     string
	existed bool
	had     map[string]bool
}

func newDirUndo(dir string) *dirUndo {
	u := &dirUndo{dir: dir, had: map[string]bool{}}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, iofs.ErrNotExist) {
		return u
	}
	u.existed = true
	for _, e := range entries {
		u.had[e.Name()] = true
	}
	return u
}

func (u *dirUndo) run() {
	if !u.existed {
		os.RemoveAll(u.dir)
		return
	}
	entries, _ := os.ReadDir(u.dir)
	for _, e := range entries {
		if !u.had[e.Name()] {
			os.RemoveAll(filepath.Join(u.dir, e.Name()))
		}
	}
}

// inputSize returns the size of in when it is a regular file, or -1.
func inputSize(in io.Reader) int64 {
	f, ok := in.(*os.File)
	if !ok {
		return -1
	}
	info, err := f.Stat()
	if err != nil || !info.Mode().IsRegular() {
		return -1
	}
	return info.Size()
}

// countingReader tells read how many bytes were read so far.
type countingReader struct {
	r    io.Reader
	n    int64
	read func(n int64)
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	c.read(c.n)
	return n, err
}

// ctxReader is r until ctx is done, then an error: an import stops when
// the command is interrupted, and undoes what it created, also while it
// waits for input that does not come (a pipe whose writer is slow or
// stuck, a FIFO): a read of standard input cannot be cut short, so each
// read runs beside, into a buffer of its own, and one still waiting when
// ctx ends is left to the process's exit.
type ctxReader struct {
	ctx  context.Context
	r    io.Reader
	buf  []byte
	read chan ctxRead
}

type ctxRead struct {
	n   int
	err error
}

func newCtxReader(ctx context.Context, r io.Reader) *ctxReader {
	return &ctxReader{ctx: ctx, r: r, read: make(chan ctxRead, 1)}
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	if cap(c.buf) < len(p) {
		c.buf = make([]byte, len(p))
	}
	buf := c.buf[:len(p)]
	go func() {
		n, err := c.r.Read(buf)
		c.read <- ctxRead{n, err}
	}()
	select {
	case r := <-c.read:
		return copy(p, buf[:r.n]), r.err
	case <-c.ctx.Done():
		c.buf = nil // the read left waiting keeps the old one
		return 0, c.ctx.Err()
	}
}

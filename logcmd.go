package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

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
	return c.stream(cf, cfg, "/admin/log?"+q.Encode())
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
	target := "/admin/log/export"
	if *from > 0 {
		target += "?from=" + strconv.FormatUint(*from, 10)
	}
	return c.stream(cf, cfg, target)
}

// stream runs an admin request whose answer is JSON lines.
func (c *cli) stream(cf *commonFlags, cfg *config.Config, target string) int {
	out := &streamOut{c: c, cf: cf}
	status, err := c.admin(cfg, http.MethodGet, target, nil, out)
	out.flush()
	if err != nil {
		return c.fail(cf, "%v", err)
	}
	if status != http.StatusOK || out.failed {
		return exitFail
	}
	return exitOK
}

func (c *cli) logVerify(args []string) int {
	fs, cf := c.flagSet("log verify")
	if !c.parse(fs, args, 0) {
		return c.usageExit()
	}
	cfg, err := c.config(cf)
	if err != nil {
		return c.fail(cf, "%v", err)
	}
	var body bytes.Buffer
	status, err := c.admin(cfg, http.MethodGet, "/admin/log/verify", nil, &body)
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
	if json.Unmarshal(body.Bytes(), &res) != nil || (status != http.StatusOK && status != http.StatusConflict) {
		var e demohttp.AdminError
		_ = json.Unmarshal(body.Bytes(), &e)
		return c.fail(cf, "%s", e.Error)
	}
	c.stdout.Write(body.Bytes())
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
	store, err := eventlog.OpenStore(cfg.DataDir, eventlog.StoreOptions{Create: true, Logger: quietLogger()})
	if err != nil {
		return c.fail(cf, "%s", openError(cfg.DataDir, err))
	}
	defer store.Close()
	reg := projections.NewRegistry()
	imported := projections.NewState()
	n, err := eventlog.Import(store, reg, in, eventlog.ImportOptions{Check: imported.Checker(reg, cfg.Delivery.AllowPrivateNetworks)})
	var ie *eventlog.ImportError
	switch {
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
	fmt.Fprintf(c.stdout, "{\"imported\":%d}\n", n)
	return exitOK
}

package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"

	demohttp "demosvc/http"
	"demosvc/projections"
)

// accounts dispatches `demosvc accounts create|list`.
func (c *cli) accounts(args []string) int {
	if len(args) == 0 {
		return c.groupHelp("accounts", args)
	}
	switch args[0] {
	case "create":
		fs, cf := c.flagSet("accounts create")
		name := fs.String("name", "", "account `name` (required)")
		plan := fs.String("plan", "starter", "`plan`: starter, pro or enterprise")
		rpm := fs.Int("rpm", 0, "enterprise only: requests per minute (0 = unlimited)")
		if !c.parse(fs, args[1:], 0) {
			return c.usageExit()
		}
		if *name == "" {
			return c.usageError("accounts create", "--name is required")
		}
		// Checked here, naming the flag, as a wrong command line: the
		// server would name the field of its own input.
		if err := projections.CheckAccountInput(projections.TrimText(*name), *plan, *rpm); err != nil {
			return c.flagError("accounts create", err, map[string]string{"name": "--name", "plan": "--plan", "rate_limit_per_minute": "--rpm"})
		}
		return c.adminJSON(cf, http.MethodPost, "/admin/accounts",
			demohttp.AccountInput{Name: *name, Plan: *plan, RateLimitPerMinute: *rpm})
	case "list":
		fs, cf := c.flagSet("accounts list")
		if !c.parse(fs, args[1:], 0) {
			return c.usageExit()
		}
		return c.adminJSON(cf, http.MethodGet, "/admin/accounts", nil)
	}
	return c.groupHelp("accounts", args)
}

// keys dispatches `demosvc keys create|list|revoke`.
func (c *cli) keys(args []string) int {
	if len(args) == 0 {
		return c.groupHelp("keys", args)
	}
	switch args[0] {
	case "create":
		fs, cf := c.flagSet("keys create")
		account := fs.String("account", "", "account `id` (required)")
		if !c.parse(fs, args[1:], 0) {
			return c.usageExit()
		}
		if *account == "" {
			return c.usageError("keys create", "--account is required")
		}
		return c.adminJSON(cf, http.MethodPost, "/admin/keys", demohttp.KeyInput{AccountID: *account})
	case "list":
		fs, cf := c.flagSet("keys list")
		account := fs.String("account", "", "only the keys of this account `id`")
		if !c.parse(fs, args[1:], 0) {
			return c.usageExit()
		}
		target := "/admin/keys"
		if *account != "" {
			target += "?account=" + url.QueryEscape(*account)
		}
		return c.adminJSON(cf, http.MethodGet, target, nil)
	case "revoke":
		fs, cf := c.flagSet("keys revoke")
		if !c.parse(fs, args[1:], 1) {
			return c.usageExit()
		}
		return c.adminJSON(cf, http.MethodPost, "/admin/keys/"+url.PathEscape(c.args[0])+"/revoke", nil)
	}
	return c.groupHelp("keys", args)
}

// adminJSON runs an admin request with a JSON body (nil for none) and
// prints the JSON answer, or the error on stderr.
func (c *cli) adminJSON(cf *commonFlags, method, target string, in any) int {
	cfg, err := c.config(cf)
	if err != nil {
		return c.fail(cf, "%v", err)
	}
	var body *bytes.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return c.fail(cf, "%v", err)
		}
		body = bytes.NewReader(b)
	} else {
		body = bytes.NewReader(nil)
	}
	var out bytes.Buffer
	status, err := c.admin(cfg, method, target, body, &out)
	if err != nil {
		return c.fail(cf, "%v", err)
	}
	if status >= 300 {
		var e demohttp.AdminError
		if json.Unmarshal(out.Bytes(), &e) != nil || e.Error == "" {
			e.Error = out.String()
		}
		return c.fail(cf, "%s", e.Error)
	}
	c.stdout.Write(out.Bytes())
	return exitOK
}

// usageError reports a wrong command line.
func (c *cli) usageError(cmd, msg string) int {
	c.fail(&commonFlags{name: cmd}, "%s", msg)
	return exitUsage
}

// flagError is usageError for err, the check of an input whose fields
// flags fill (by field name), said of the flag.
func (c *cli) flagError(cmd string, err error, flags map[string]string) int {
	var pe *projections.Error
	if errors.As(err, &pe) && flags[pe.Param] != "" {
		return c.usageError(cmd, flags[pe.Param]+": "+pe.Message)
	}
	return c.usageError(cmd, err.Error())
}

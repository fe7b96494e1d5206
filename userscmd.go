package main

import (
	"fmt"
	"net/http"
	"net/url"

	demohttp "demosvc/http"
	"demosvc/projections"
)

// users dispatches `demosvc users create|list|reset-password|disable`:
// the dashboard's users, managed by the operator.
func (c *cli) users(args []string) int {
	if len(args) == 0 {
		return c.groupHelp("users", args)
	}
	switch args[0] {
	case "create":
		fs, cf := c.flagSet("users create")
		account := fs.String("account", "", "account `id` (required)")
		email := fs.String("email", "", "the user's `e-mail` (required)")
		role := fs.String("role", "viewer", "`role`: viewer (read only, the default) or admin")
		if !c.parse(fs, args[1:], 0) {
			return c.usageExit()
		}
		if *account == "" || *email == "" {
			return c.usageError("users create", "--account and --email are required")
		}
		if *role != "" && *role != projections.RoleViewer && *role != projections.RoleAdmin { // "": the default, viewer
			return c.usageError("users create", fmt.Sprintf("--role: must be admin or viewer, got %q", *role))
		}
		return c.adminJSON(cf, http.MethodPost, "/admin/users", demohttp.UserInput{AccountID: *account, Email: *email, Role: *role})
	case "list":
		fs, cf := c.flagSet("users list")
		account := fs.String("account", "", "only the users of this account `id`")
		if !c.parse(fs, args[1:], 0) {
			return c.usageExit()
		}
		target := "/admin/users"
		if *account != "" {
			target += "?account=" + url.QueryEscape(*account)
		}
		return c.adminJSON(cf, http.MethodGet, target, nil)
	case "reset-password", "disable":
		fs, cf := c.flagSet("users " + args[0])
		if !c.parse(fs, args[1:], 1) {
			return c.usageExit()
		}
		return c.adminJSON(cf, http.MethodPost, "/admin/users/"+url.PathEscape(c.args[0])+"/"+args[0], nil)
	}
	return c.groupHelp("users", args)
}

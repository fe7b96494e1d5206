package main

import "net/http"

// cluster dispatches `demosvc cluster status`.
func (c *cli) cluster(args []string) int {
	if len(args) == 0 {
		return c.groupHelp("cluster", args)
	}
	switch args[0] {
	case "status":
		fs, cf := c.flagSet("cluster status")
		if !c.parse(fs, args[1:], 0) {
			return c.usageExit()
		}
		return c.adminJSON(cf, http.MethodGet, "/admin/cluster", nil)
	}
	return c.groupHelp("cluster", args)
}

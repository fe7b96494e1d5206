package http

import (
	"demosvc/config"
	"demosvc/projections"
)

// PlanLimit returns the requests per minute in force for an account (0 is
// unlimited): its plan's figure from config, or an enterprise account's
// own. The API's limiter and the dashboard's account page both read it.
func PlanLimit(cfg *config.Config, a projections.Account) int {
	switch a.Plan {
	case projections.PlanStarter:
		return cfg.Plans.Starter
	case projections.PlanPro:
		return cfg.Plans.Pro
	default:
		return a.RateLimitPerMinute
	}
}

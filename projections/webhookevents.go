package projections

import "slices"

// WebhookEventNames returns the events a webhook may subscribe to, sorted:
// the dashboard's registration form offers them.
func WebhookEventNames() []string { return slices.Clone(webhookEvents) }

package delivery

import (
	"encoding/json"
	"time"
)

// MarshalJSON renders a delivery as the attempt log shows it: id,
// event_id, event, status, attempts, last_status_code, last_error,
// next_attempt_at, created_at, updated_at (RFC 3339, UTC).
func (d Delivery) MarshalJSON() ([]byte, error) {
	stamp := func(sec int64) string { return time.Unix(sec, 0).UTC().Format(time.RFC3339) }
	var next *string
	if d.NextAttemptAt != 0 {
		s := time.UnixMilli(d.NextAttemptAt).UTC().Truncate(time.Second).Format(time.RFC3339)
		next = &s
	}
	var code *int
	if d.LastStatusCode != 0 {
		code = &d.LastStatusCode
	}
	var lastErr *string
	if d.LastError != "" {
		lastErr = &d.LastError
	}
	return json.Marshal(struct {
		ID             string  `json:"id"`
		EventID        string  `json:"event_id"`
		Event          string  `json:"event"`
		Status         string  `json:"status"`
		Attempts       int     `json:"attempts"`
		LastStatusCode *int    `json:"last_status_code"`
		LastError      *string `json:"last_error"`
		NextAttemptAt  *string `json:"next_attempt_at"`
		CreatedAt      string  `json:"created_at"`
		UpdatedAt      string  `json:"updated_at"`
	}{d.ID, d.EventID, d.Event, d.Status, d.Attempts, code, lastErr, next, stamp(d.CreatedAt), stamp(d.UpdatedAt)})
}

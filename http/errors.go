package http

import (
	"net/http"

	"demosvc/projections"
)

// statuses is the one table from error code to HTTP status.
var statuses = map[string]int{
	projections.EInvalid:             http.StatusBadRequest,
	projections.EUnauthorized:        http.StatusUnauthorized,
	projections.ENotFound:            http.StatusNotFound,
	projections.EMethodNotAllowed:    http.StatusMethodNotAllowed,
	projections.EInvalidState:        http.StatusConflict,
	projections.EAgentInactive:       http.StatusConflict,
	projections.ELimitExceeded:       http.StatusConflict,
	projections.EIdempotencyConflict: http.StatusConflict,
	projections.EPayloadTooLarge:     http.StatusRequestEntityTooLarge,
	projections.EUnsupportedMedia:    http.StatusUnsupportedMediaType,
	projections.ERateLimited:         http.StatusTooManyRequests,
	projections.EInternal:            http.StatusInternalServerError,
	projections.EUnavailable:         http.StatusServiceUnavailable,
}

// statusOf returns the HTTP status of an error code.
func statusOf(code string) int {
	if s, ok := statuses[code]; ok {
		return s
	}
	return http.StatusInternalServerError
}

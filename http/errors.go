package http

import (
	"errors"
	"fmt"
	"net/http"

	"demosvc/projections"
)

// Transport error codes: conditions of a request that this layer answers
// itself, before or around the domain. The domain's codes are projections'
// (invalid_request, not_found, invalid_state, …); both are API codes.
const (
	EUnauthorized     = "unauthorized"
	EMethodNotAllowed = "method_not_allowed"
	EPayloadTooLarge  = "payload_too_large"
	EUnsupportedMedia = "unsupported_media_type"
	ERateLimited      = "rate_limited"
	EUnavailable      = "unavailable"
)

// statuses is the one table from error code to HTTP status.
var statuses = map[string]int{
	projections.EInvalid:             http.StatusBadRequest,
	EUnauthorized:                    http.StatusUnauthorized,
	projections.ENotFound:            http.StatusNotFound,
	EMethodNotAllowed:                http.StatusMethodNotAllowed,
	projections.EInvalidState:        http.StatusConflict,
	projections.EAgentInactive:       http.StatusConflict,
	projections.ELimitExceeded:       http.StatusConflict,
	projections.EIdempotencyConflict: http.StatusConflict,
	EPayloadTooLarge:                 http.StatusRequestEntityTooLarge,
	EUnsupportedMedia:                http.StatusUnsupportedMediaType,
	ERateLimited:                     http.StatusTooManyRequests,
	projections.EInternal:            http.StatusInternalServerError,
	EUnavailable:                     http.StatusServiceUnavailable,
	EHeaderTooLarge:                  http.StatusRequestHeaderFieldsTooLarge,
	ENotImplemented:                  http.StatusNotImplemented,
}

// statusOf returns the HTTP status of an error code.
func statusOf(code string) int {
	if s, ok := statuses[code]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// ErrorObject is the content of every error response. As an error, it is
// one this layer decided itself (a bad query, a body it cannot decode, a
// missing key), where a *projections.Error is one the domain decided.
type ErrorObject struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Param   string `json:"param,omitempty"`
}

func (e *ErrorObject) Error() string { return e.Code + ": " + e.Message }

// apiError returns an *ErrorObject with code, a formatted message, and the
// request field at fault in param ("" for none). String arguments and
// param are values from the request: they are clipped to
// projections.MaxEcho bytes, so that an error never repeats a huge input.
func apiError(code, param, format string, args ...any) *ErrorObject {
	return &ErrorObject{Code: code, Message: fmt.Sprintf(format, projections.ClipArgs(args)...), Param: clip(param)}
}

// clip is projections.Clip: a request value cut for an error message.
func clip(s string) string { return projections.Clip(s) }

// shown returns what a client is shown of err when err is an answer,
// decided by this layer or by the domain; false for anything else.
func shown(err error) (ErrorObject, bool) {
	var own *ErrorObject
	var domain *projections.Error
	switch {
	case errors.As(err, &own):
		return *own, true
	case errors.As(err, &domain):
		return ErrorObject{Code: domain.Code, Message: domain.Message, Param: domain.Param}, true
	}
	return ErrorObject{}, false
}

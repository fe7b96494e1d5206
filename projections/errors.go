package projections

import "fmt"

// Error codes of the domain: the rules a command or a read breaks. http/
// owns the one table from code to status, and the codes of transport
// conditions (a missing key, a rate limit, a body it cannot take).
const (
	EInvalid             = "invalid_request"
	ENotFound            = "not_found"
	EInvalidState        = "invalid_state"
	EAgentInactive       = "agent_inactive"
	ELimitExceeded       = "limit_exceeded"
	EIdempotencyConflict = "idempotency_conflict"
	EInternal            = "internal_error"
)

// Error is a domain error: a machine-readable code, a message for people,
// and the request field it concerns, if any.
type Error struct {
	Code    string
	Message string
	Param   string
}

func (e *Error) Error() string {
	if e.Param != "" {
		return fmt.Sprintf("%s: %s (%s)", e.Code, e.Message, e.Param)
	}
	return e.Code + ": " + e.Message
}

// Errorf returns an *Error with code and a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ParamErrorf returns an *Error about request field param.
func ParamErrorf(code, param, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Param: param}
}

package projections

import (
	"fmt"
	"unicode/utf8"
)

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

// Errorf returns an *Error with code and a formatted message. Every string
// argument is a value that came from a client: it is shown cut to MaxEcho
// bytes (see Clip).
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, ClipArgs(args)...)}
}

// ParamErrorf returns an *Error about request field param, with string
// arguments clipped as Errorf's.
func ParamErrorf(code, param, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, ClipArgs(args)...), Param: Clip(param)}
}

// MaxEcho is the most bytes of a client's value an error message repeats:
// a 1 MB number or name is shown by its start, not whole.
const MaxEcho = 64

// Clip returns s if it fits MaxEcho bytes, else its first MaxEcho bytes or
// fewer, cut at a character boundary, followed by "…".
func Clip(s string) string {
	if len(s) <= MaxEcho {
		return s
	}
	n := MaxEcho
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// ClipArgs returns args with every string clipped (see Clip).
func ClipArgs(args []any) []any {
	out := args
	for i, a := range args {
		if s, ok := a.(string); ok && len(s) > MaxEcho {
			if &out[0] == &args[0] {
				out = append([]any(nil), args...)
			}
			out[i] = Clip(s)
		}
	}
	return out
}

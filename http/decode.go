package http

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"unicode/utf8"

	"demosvc/projections"
)

// readJSON reads the request body into v strictly: the body must be
// declared application/json, fit http.max_body_bytes, be valid UTF-8 and
// one JSON object, and name no field v does not have. Every failure is an
// *projections.Error with the field in Param where there is one.
func (s *Server) readJSON(w http.ResponseWriter, r *http.Request, v any) ([]byte, error) {
	ct := r.Header.Get("Content-Type")
	if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
		return nil, projections.Errorf(projections.EUnsupportedMedia, "the request body must be sent with Content-Type: application/json")
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.deps.Config.HTTP.MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, projections.Errorf(projections.EPayloadTooLarge, "the request body is larger than %d bytes", tooBig.Limit)
		}
		return nil, projections.Errorf(projections.EInvalid, "reading the request body: %v", err)
	}
	if !utf8.Valid(body) {
		return nil, projections.Errorf(projections.EInvalid, "the request body is not valid UTF-8")
	}
	return body, decodeStrict(body, v)
}

// decodeStrict decodes one JSON object into v, refusing unknown fields,
// wrong types and trailing data.
func decodeStrict(body []byte, v any) error {
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return projections.Errorf(projections.EInvalid, "the request body has data after the JSON object")
	}
	return nil
}

// jsonError turns a decoding error into a client-facing error naming the
// field at fault.
func jsonError(err error) error {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.EOF):
		return projections.Errorf(projections.EInvalid, "the request body is empty; send a JSON object")
	case errors.As(err, &syntax), errors.Is(err, io.ErrUnexpectedEOF):
		return projections.Errorf(projections.EInvalid, "the request body is not valid JSON: %v", err)
	case errors.As(err, &typ):
		if typ.Field == "" {
			return projections.Errorf(projections.EInvalid, "the request body must be a JSON object, not %s", typ.Value)
		}
		return projections.ParamErrorf(projections.EInvalid, typ.Field, "%s must be %s, not %s", typ.Field, jsonTypeName(typ.Type.String()), typ.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		field := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return projections.ParamErrorf(projections.EInvalid, field, "unknown field %q", field)
	default:
		var pe *projections.Error
		if errors.As(err, &pe) {
			return pe
		}
		return projections.Errorf(projections.EInvalid, "the request body is not valid: %v", err)
	}
}

// jsonTypeName names a Go type the way a JSON client thinks of it.
func jsonTypeName(goType string) string {
	goType = strings.TrimPrefix(goType, "*")
	switch {
	case goType == "string":
		return "a string"
	case goType == "bool":
		return "a boolean"
	case strings.HasPrefix(goType, "int"), strings.HasPrefix(goType, "uint"):
		return "an integer"
	case strings.HasPrefix(goType, "float"):
		return "a number"
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	default:
		return fmt.Sprintf("an object (%s)", goType)
	}
}

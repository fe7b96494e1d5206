package http

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"sort"
	"strings"

	"demosvc/eventlog/strictjson"
	"demosvc/projections"
)

// readJSON reads the request body into v strictly: the body must be
// declared application/json, fit http.max_body_bytes, and be one JSON
// object with valid UTF-8 strings (see decodeStrict), and name no field v does not have. Every failure is an
// answer (see shown), with the field in Param where there is one.
func (s *Server) readJSON(w http.ResponseWriter, r *http.Request, v any) ([]byte, error) {
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			return nil, apiError(EUnsupportedMedia, "", "the request body must be sent with Content-Type: application/json")
		}
	}
	limit := s.deps.Config.HTTP.MaxBodyBytes
	if r.ContentLength > limit {
		// Refused before a byte of it is asked for: a client waiting
		// for 100 Continue gets the 413 instead, and sends nothing.
		return nil, apiError(EPayloadTooLarge, "", "the request body is larger than %d bytes", limit)
	}
	body, err := readBody(http.MaxBytesReader(w, r.Body, limit), r.ContentLength, limit)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, apiError(EPayloadTooLarge, "", "the request body is larger than %d bytes", tooBig.Limit)
		}
		// The reader's own error names the server's socket addresses (a
		// timeout's "read tcp A->B: i/o timeout"): not for the client.
		if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
			return nil, apiError(projections.EInvalid, "", "the request body did not arrive within the server's read timeout")
		}
		return nil, apiError(projections.EInvalid, "", "the request body could not be read: it ended early or is malformed")
	}
	return body, decodeStrict(body, v)
}

// readBody reads all of rd, a body that declared length bytes (-1:
// unknown). One that declares a small length within limit is read into a
// buffer of that length (net/http ends it there): io.ReadAll starts at 512
// bytes, more than most bodies of this API. A larger one is read as it
// comes, so that a length declared and not sent costs no memory.
func readBody(rd io.Reader, length, limit int64) ([]byte, error) {
	if length < 0 || length > min(limit, maxPresizedBody) {
		return io.ReadAll(rd)
	}
	body := make([]byte, length)
	if _, err := io.ReadFull(rd, body); err != nil {
		return nil, err
	}
	return body, nil
}

// maxPresizedBody is the largest body readBody allocates before reading.
const maxPresizedBody = 16 << 10

// decodeStrict decodes one JSON object into v, refusing anything but an
// object, unknown or differently-cased fields, a field given twice, wrong
// types, invalid UTF-8 or lone surrogates, and trailing data. A created
// session's usual body is read without reflection (decodeSessionInput).
func decodeStrict(body []byte, v any) error {
	if in, ok := v.(*projections.SessionInput); ok && decodeSessionInput(body, in) {
		return nil
	}
	return decodeReflective(body, v)
}

// decodeReflective is decodeStrict through strictjson, for every body.
func decodeReflective(body []byte, v any) error {
	if err := strictjson.DecodeObject(body, v); err != nil {
		var fe *strictjson.FieldError
		switch {
		case errors.Is(err, strictjson.ErrTrailingData):
			return apiError(projections.EInvalid, "", "the request body has data after the JSON object")
		case errors.As(err, &fe) && fe.Field == "":
			return apiError(projections.EInvalid, "", "the request body %s", fe.Problem)
		case errors.As(err, &fe):
			return apiError(projections.EInvalid, fe.Field, "%s %q", fe.Problem, fe.Field)
		}
		return jsonError(err)
	}
	if path := nullPath(body); path != "" {
		return apiError(projections.EInvalid, path, "%s must not be null; leave the field out instead", path)
	}
	return nil
}

// nullPath returns the dotted path of the first null in a JSON object, or
// "". No field of this API takes null: a field is either sent with a value
// or left out.
func nullPath(body []byte) string {
	if !bytes.Contains(body, []byte("null")) {
		return ""
	}
	var v any
	if json.Unmarshal(body, &v) != nil {
		return ""
	}
	return findNull(v, "")
}

func findNull(v any, prefix string) string {
	switch t := v.(type) {
	case nil:
		return strings.TrimSuffix(prefix, ".")
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if p := findNull(t[k], prefix+k+"."); p != "" {
				return p
			}
		}
	case []any:
		for i, e := range t {
			if p := findNull(e, fmt.Sprintf("%s%d.", prefix, i)); p != "" {
				return p
			}
		}
	}
	return ""
}

// jsonError turns a decoding error into a client-facing error naming the
// field at fault.
func jsonError(err error) error {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.EOF):
		return apiError(projections.EInvalid, "", "the request body is empty; send a JSON object")
	case errors.As(err, &syntax), errors.Is(err, io.ErrUnexpectedEOF):
		return apiError(projections.EInvalid, "", "the request body is not valid JSON: %v", err)
	case errors.As(err, &typ):
		if typ.Field == "" {
			return apiError(projections.EInvalid, "", "the request body must be a JSON object, not %s", typ.Value)
		}
		return apiError(projections.EInvalid, typ.Field, "%s must be %s, not %s", typ.Field, jsonTypeName(typ.Type.String()), typ.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		field := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return apiError(projections.EInvalid, field, "unknown field %q", field)
	default:
		var pe *projections.Error
		if errors.As(err, &pe) {
			return pe
		}
		return apiError(projections.EInvalid, "", "the request body is not valid: %v", err)
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
		return "an object" // a struct or a map: never the Go type's name
	}
}

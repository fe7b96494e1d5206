// Package strictjson reads JSON the way every input of demosvc is read: a
// request body, an admin command, an imported record and its payload. The
// input must be one JSON object; a field name must match the target's
// exactly (case included), appear once per object, and be one the target
// has; strings must be valid UTF-8 with no lone surrogate escape; nothing
// may follow the object. A typo, a second value or a mangled string is
// refused rather than ignored, guessed at or replaced.
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strings"
	"sync"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// ErrTrailingData is returned for data after the one JSON object.
var ErrTrailingData = errors.New("data after the JSON object")

// FieldError is input refused at one field: a name the target does not
// have (or has in another case), a name given twice in one object, a value
// that is not an object where one is required, or a string that is not
// valid UTF-8. Field is the dotted path of the field ("contact.name"), ""
// for the whole value.
type FieldError struct {
	Field   string
	Problem string // "unknown field", "duplicate field", …
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return e.Problem
	}
	return fmt.Sprintf("%s %q", e.Problem, e.Field)
}

// Problems a FieldError names.
const (
	ProblemUnknown   = "unknown field"
	ProblemDuplicate = "duplicate field"
	ProblemUTF8      = "invalid UTF-8 or lone surrogate in field"
)

// DecodeObject decodes the one JSON object of data into v, a pointer. It
// returns io.EOF for empty input; a *FieldError for a name v does not
// have exactly, a duplicate name, invalid UTF-8 or a lone surrogate, or a
// value that is not an object (Field "", Problem "must be a JSON object,
// not …"); ErrTrailingData for anything but white space after the object;
// otherwise encoding/json's errors (syntax, type).
func DecodeObject(data []byte, v any) error {
	// Most input is valid, and one pass of the v2 decoder reads it: it
	// refuses unknown, duplicate and mis-cased names, invalid UTF-8 and
	// trailing data itself, so whatever it accepts the checked path below
	// accepts as the same value (FuzzDecodeObject holds it to that). It is
	// half the cost of the two passes that name a refusal precisely.
	// (It takes a top-level null as "leave v as it is": only an object
	// goes that way.)
	if t := bytes.TrimLeft(data, " \t\r\n"); len(t) > 0 && t[0] == '{' &&
		jsonv2.Unmarshal(data, v, jsonv2.RejectUnknownMembers(true)) == nil {
		return nil
	}
	reflect.ValueOf(v).Elem().SetZero()
	return DecodeChecked(data, v)
}

// DecodeChecked is DecodeObject in two passes, the strict tokenizer then
// encoding/json, whose errors name a refusal best: the path DecodeObject
// takes for input its one pass refuses. It is exported so that tests of
// the types a caller decodes can hold the two paths to the same result.
func DecodeChecked(data []byte, v any) error {
	strictErr := check(data, reflect.TypeOf(v))
	var syn *syntaxError
	if strictErr != nil && !errors.As(strictErr, &syn) {
		return strictErr
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return ErrTrailingData
	}
	// encoding/json names a syntax error best; one only the strict
	// tokenizer sees is still an error.
	return strictErr
}

// syntaxError is an error of the strict tokenizer that is neither a
// field's nor trailing data: encoding/json, which reads data next, names
// it in its own words, and this one stands if encoding/json misses it.
type syntaxError struct{ err error }

func (e *syntaxError) Error() string { return "invalid JSON: " + e.err.Error() }
func (e *syntaxError) Unwrap() error { return e.err }

// check reads data once with a strict tokenizer (duplicate names, invalid
// UTF-8 and lone surrogates are errors there) and walks t alongside, so
// that every object name is matched exactly against the struct it fills.
func check(data []byte, t reflect.Type) error {
	d := jsontext.NewDecoder(bytes.NewReader(data))
	switch k := d.PeekKind(); k {
	case '{':
	case 0:
		_, err := d.ReadToken()
		if err == io.EOF {
			return io.EOF
		}
		return &syntaxError{err}
	default:
		return &FieldError{Problem: "must be a JSON object, not " + kindName(k)}
	}
	if err := walk(d, t, ""); err != nil {
		return tokenError(err)
	}
	if _, err := d.ReadToken(); err != io.EOF {
		return ErrTrailingData
	}
	return nil
}

func tokenError(err error) error {
	var se *jsontext.SyntacticError
	if !errors.As(err, &se) {
		var fe *FieldError
		if errors.As(err, &fe) {
			return err
		}
		return &syntaxError{err}
	}
	field := dotted(se.JSONPointer)
	switch {
	case errors.Is(se.Err, jsontext.ErrDuplicateName):
		return &FieldError{Field: field, Problem: ProblemDuplicate}
	case strings.Contains(se.Err.Error(), "invalid UTF-8"), loneSurrogate.MatchString(se.Err.Error()):
		if field == "" {
			return &FieldError{Problem: "has invalid UTF-8 or a lone surrogate in a field name"}
		}
		return &FieldError{Field: field, Problem: ProblemUTF8}
	}
	return &syntaxError{err}
}

// loneSurrogate matches the tokenizer's words for an escaped surrogate
// half without its pair, such as "\ud800".
var loneSurrogate = regexp.MustCompile(`invalid surrogate pair|invalid escape sequence "\\u[dD][89a-fA-F]`)

func dotted(p jsontext.Pointer) string {
	var parts []string
	for tok := range p.Tokens() {
		parts = append(parts, tok)
	}
	return strings.Join(parts, ".")
}

var unmarshaler = reflect.TypeFor[json.Unmarshaler]()

// walk reads one value of type t (nil: any) from d, refusing an object
// name a struct does not have exactly.
func walk(d *jsontext.Decoder, t reflect.Type, path string) error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t != nil && (t.Implements(unmarshaler) || reflect.PointerTo(t).Implements(unmarshaler)) {
		t = nil // it reads its own JSON
	}
	if t == nil {
		// Nothing in it is matched against a struct: read past it, at
		// a cost linear in its size, however deep it nests (walking it
		// kept a path per level: a body nested 10,000 deep took a
		// gigabyte).
		return d.SkipValue()
	}
	tok, err := d.ReadToken()
	if err != nil {
		return err
	}
	switch tok.Kind() {
	case '{':
		var names map[string]reflect.Type
		if t.Kind() == reflect.Struct {
			names = fieldsOf(t)
		}
		for d.PeekKind() != '}' {
			tok, err := d.ReadToken()
			if err != nil {
				return err
			}
			name := tok.String()
			var ft reflect.Type
			switch {
			case names != nil:
				var ok bool
				if ft, ok = names[name]; !ok {
					return &FieldError{Field: path + name, Problem: ProblemUnknown}
				}
			case t.Kind() == reflect.Map:
				ft = t.Elem()
			}
			if err := walk(d, ft, path+name+"."); err != nil {
				return err
			}
		}
		_, err = d.ReadToken()
		return err
	case '[':
		var et reflect.Type
		if t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
			et = t.Elem()
		}
		for i := 0; d.PeekKind() != ']'; i++ {
			if err := walk(d, et, fmt.Sprintf("%s%d.", path, i)); err != nil {
				return err
			}
		}
		_, err = d.ReadToken()
		return err
	}
	return nil
}

var fieldCache sync.Map // reflect.Type -> map[string]reflect.Type

// fieldsOf returns the JSON names of struct t's fields, as encoding/json
// names them (tag name, else the Go name; embedded structs flattened).
func fieldsOf(t reflect.Type) map[string]reflect.Type {
	if m, ok := fieldCache.Load(t); ok {
		return m.(map[string]reflect.Type)
	}
	m := map[string]reflect.Type{}
	addFields(m, t)
	fieldCache.Store(t, m)
	return m
}

func addFields(m map[string]reflect.Type, t reflect.Type) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := f.Type
		if f.Anonymous && name == "" {
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				addFields(m, ft)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		m[name] = f.Type
	}
}

func kindName(k jsontext.Kind) string {
	switch k {
	case 'n':
		return "null"
	case 't', 'f':
		return "a boolean"
	case '"':
		return "a string"
	case '0':
		return "a number"
	case '[':
		return "an array"
	}
	return "valid JSON"
}

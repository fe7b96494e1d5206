// Package strictjson reads JSON the way every input of demosvc is read: a
// request body, an admin command, an imported record and its payload. A
// field the target does not have, or anything after the value, is an error,
// so that a typo or a second value is refused rather than ignored.
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
)

// ErrTrailingData is returned for data after the one JSON object.
var ErrTrailingData = errors.New("data after the JSON object")

// DecodeObject decodes the one JSON object of data into v, a pointer to a
// struct. A field v does not have is encoding/json's "unknown field" error;
// anything but white space after the object is ErrTrailingData.
func DecodeObject(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return ErrTrailingData
	}
	return nil
}

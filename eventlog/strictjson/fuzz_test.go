package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"testing"
	"unicode/utf8"
)

// FuzzDecodeObject feeds arbitrary bytes to DecodeObject. It must never
// panic, and whatever it accepts must be one object with no name given
// twice in any object, no invalid UTF-8, and decode to a value that
// re-encodes to JSON DecodeObject accepts again as the same value.
func FuzzDecodeObject(f *testing.F) {
	for _, s := range []string{
		`{"name":"a","intent_score":5,"contact":{"name":"b","email":"c@d.ef"},"tags":["x"],"meta":{"k":[1,{"z":null}]}}`,
		`{"INTENT_SCORE":95}`,
		`{"intent_score":95,"intent_score":5}`,
		`{"meta":{"k":1,"k":2}}`,
		`null`, `[]`, `{}`, ``, `{} {}`,
		`{"name":"\ud800"}`, `{"name":"\ud83d\ude00"}`, "{\"name\":\"\xff\"}",
		`{"raw":{"a":1}}`, `{"intent_score":1e999}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var v, checked strictTarget
		err := DecodeObject(data, &v)
		checkedErr := DecodeChecked(data, &checked)
		if (err == nil) != (checkedErr == nil) {
			t.Fatalf("%q: DecodeObject says %v, the checked path %v", data, err, checkedErr)
		}
		if err != nil {
			return
		}
		if !reflect.DeepEqual(v, checked) {
			t.Fatalf("%q: DecodeObject decoded %+v, the checked path %+v", data, v, checked)
		}
		if !utf8.Valid(data) {
			t.Fatalf("accepted invalid UTF-8: %q", data)
		}
		if name, dup := duplicateName(data); dup {
			t.Fatalf("accepted %q with name %q twice", data, name)
		}
		again, err := json.Marshal(&v)
		if err != nil {
			t.Fatalf("re-encoding %q: %v", data, err)
		}
		var w strictTarget
		if err := DecodeObject(again, &w); err != nil {
			t.Fatalf("%q re-encoded as %s, which is refused: %v", data, again, err)
		}
		if !reflect.DeepEqual(normal(t, &v), normal(t, &w)) {
			t.Fatalf("%q decoded as %+v, re-encoded and decoded as %+v", data, v, w)
		}
	})
}

// normal returns v as a generic JSON tree, so that values equal as JSON
// compare equal (a RawMessage's spacing aside).
func normal(t *testing.T, v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// duplicateName reports a name given twice in one object of data, read
// with encoding/json's tokenizer (an oracle independent of the decoder).
func duplicateName(data []byte) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	type frame struct {
		object bool
		seen   map[string]bool
		key    bool // the next string token is a name
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) || err != nil {
			return "", false
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if s, ok := tok.(string); ok && top != nil && top.object && top.key {
			if top.seen[s] {
				return s, true
			}
			top.seen[s] = true
			top.key = false
			continue
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{object: true, seen: map[string]bool{}, key: true})
			continue
		case json.Delim('['):
			stack = append(stack, &frame{})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		if len(stack) > 0 && stack[len(stack)-1].object {
			stack[len(stack)-1].key = true
		}
	}
}

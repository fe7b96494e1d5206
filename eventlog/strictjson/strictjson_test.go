package strictjson

import (
	"encoding/json"
	"errors"
	"runtime"
	"strings"
	"testing"
)

func TestDecodeObjectRefusesUnknownFieldsAndTrailingData(t *testing.T) {
	type target struct {
		Name string `json:"name"`
	}
	for _, tc := range []struct {
		in      string
		wantErr string // "" for success
	}{
		{`{"name":"a"}`, ""},
		{" {\"name\":\"a\"} \n\t", ""},
		{`{"name":"a","colour":"red"}`, `unknown field "colour"`},
		{`{"name":"a"} {"name":"b"}`, ErrTrailingData.Error()},
		{`{"name":"a"}}`, ErrTrailingData.Error()},
		{`{"name":"a"} x`, ErrTrailingData.Error()},
		{`{"name":`, "unexpected EOF"},
		{``, "EOF"},
	} {
		var v target
		err := DecodeObject([]byte(tc.in), &v)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%q: %v, want no error", tc.in, err)
		case tc.wantErr == "" && v.Name != "a":
			t.Errorf("%q: name %q, want a", tc.in, v.Name)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%q: error %v, want one containing %q", tc.in, err, tc.wantErr)
		}
	}
	if err := DecodeObject([]byte(`{} {}`), &struct{}{}); !errors.Is(err, ErrTrailingData) {
		t.Errorf("a second object: %v, want ErrTrailingData", err)
	}
}

// strictTarget is a request-like shape: nested structs, a map and a
// free-form value, as the API, import and payload types have.
type strictTarget struct {
	Name    string          `json:"name"`
	Score   *int            `json:"intent_score"`
	Contact *strictContact  `json:"contact"`
	Tags    []string        `json:"tags"`
	Meta    map[string]any  `json:"meta"`
	Raw     json.RawMessage `json:"raw"`
}

type strictContact struct {
	Name  string `json:"name"`
	Email string `json:"email"`
}

func TestDecodeObjectIsExactAndRefusesWhatItWouldGuess(t *testing.T) {
	for _, tc := range []struct {
		in, wantErr string // wantErr "" for success
		field       string // FieldError.Field expected, when wantErr is one
	}{
		{`{"name":"a","intent_score":5,"contact":{"name":"b"}}`, "", ""},
		{`{"INTENT_SCORE":95}`, `unknown field "INTENT_SCORE"`, "INTENT_SCORE"},
		{`{"Name":"a"}`, `unknown field "Name"`, "Name"},
		{`{"contact":{"EMAIL":"x"}}`, `unknown field "contact.EMAIL"`, "contact.EMAIL"},
		{`{"intent_score":95,"intent_score":5}`, `duplicate field "intent_score"`, "intent_score"},
		{`{"contact":{"name":"a","name":"b"}}`, `duplicate field "contact.name"`, "contact.name"},
		{`{"meta":{"k":1,"k":2}}`, `duplicate field "meta.k"`, "meta.k"},
		{`{"raw":{"k":1,"k":2}}`, `duplicate field "raw.k"`, "raw.k"},
		{`null`, "must be a JSON object, not null", ""},
		{` null `, "must be a JSON object, not null", ""},
		{`[{"name":"a"}]`, "must be a JSON object, not an array", ""},
		{`"a"`, "must be a JSON object, not a string", ""},
		{`{"name":"\ud800"}`, `lone surrogate in field "name"`, "name"},
		{`{"name":"a\udfffb"}`, `lone surrogate in field "name"`, "name"},
		{"{\"name\":\"\xff\"}", `invalid UTF-8`, "name"},
		{`{"\udc00":1}`, "lone surrogate in a field name", ""},
		{`{"name":"\ud83d\ude00"}`, "", ""}, // a proper pair
		{`{"meta":{"K":1,"k":2}}`, "", ""},  // a map's keys are data, case and all
	} {
		var v strictTarget
		err := DecodeObject([]byte(tc.in), &v)
		if tc.wantErr == "" {
			if err != nil {
				t.Errorf("%s: %v, want no error", tc.in, err)
			}
			continue
		}
		var fe *FieldError
		switch {
		case err == nil || !strings.Contains(err.Error(), tc.wantErr):
			t.Errorf("%s: error %v, want one containing %q", tc.in, err, tc.wantErr)
		case !errors.As(err, &fe):
			t.Errorf("%s: error %T, want *FieldError", tc.in, err)
		case fe.Field != tc.field:
			t.Errorf("%s: field %q, want %q", tc.in, fe.Field, tc.field)
		}
	}
}

// TestADeeplyNestedValueCostsLinearMemory: a value nested thousands deep
// where a string is expected (what a client can send in one body) is
// refused at a cost linear in its size. Walking it kept a path per level,
// quadratic: a 240 KB body took about a gigabyte.
func TestADeeplyNestedValueCostsLinearMemory(t *testing.T) {
	type target struct {
		Name string `json:"name"`
	}
	const depth = 9990
	body := `{"name":` + strings.Repeat(`{"aaaaaaaaaaaaaaaaaaaa":`, depth) + `1` + strings.Repeat(`}`, depth) + `}`
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	var v target
	err := DecodeChecked([]byte(body), &v)
	runtime.ReadMemStats(&after)
	var fe *FieldError
	if !errors.As(err, &fe) && err == nil {
		t.Fatalf("a nested object for a string: %v, want an error", err)
	}
	if allocated := after.TotalAlloc - before.TotalAlloc; allocated > 64*uint64(len(body)) {
		t.Errorf("checking a %d-byte body nested %d deep allocated %d bytes (%.0fx its size)",
			len(body), depth, allocated, float64(allocated)/float64(len(body)))
	}
}

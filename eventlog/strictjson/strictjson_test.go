package strictjson

import (
	"errors"
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

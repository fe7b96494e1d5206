package msgp

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// Every appender writes what msgpack's own encoder writes for the same
// value, across each boundary between encodings.
func TestAppendersMatchMsgpack(t *testing.T) {
	lib := func(compact bool, encode func(e *msgpack.Encoder) error) []byte {
		var buf bytes.Buffer
		e := msgpack.NewEncoder(&buf)
		e.UseCompactInts(compact)
		if err := encode(e); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	check := func(what string, got, want []byte) {
		t.Helper()
		if !bytes.Equal(got, want) {
			t.Errorf("%s: got %x, msgpack writes %x", what, got[:min(12, len(got))], want[:min(12, len(want))])
		}
	}
	uints := []uint64{0, 1, 127, 128, 255, 256, 65535, 65536, math.MaxUint32, math.MaxUint32 + 1, math.MaxUint64}
	for _, n := range uints {
		check("uint", AppendUint(nil, n), lib(true, func(e *msgpack.Encoder) error { return e.EncodeUint(n) }))
		check("uint64", AppendUint64(nil, n), lib(false, func(e *msgpack.Encoder) error { return e.Encode(n) }))
	}
	ints := []int64{0, 1, 127, 128, -1, -32, -33, -128, -129, -32768, -32769, math.MinInt32, math.MinInt32 - 1,
		math.MinInt64, math.MaxInt64, 65536}
	for _, n := range ints {
		check("int", AppendInt(nil, n), lib(false, func(e *msgpack.Encoder) error { return e.Encode(int(n)) }))
		check("int64", AppendInt64(nil, n), lib(false, func(e *msgpack.Encoder) error { return e.Encode(n) }))
	}
	for _, n := range []int{0, 1, 31, 32, 255, 256, 65535, 65536} {
		s := strings.Repeat("a", n)
		check("str", AppendStr(nil, s), lib(false, func(e *msgpack.Encoder) error { return e.Encode(s) }))
		p := []byte(s)
		check("bin", AppendBin(nil, p), lib(false, func(e *msgpack.Encoder) error { return e.Encode(p) }))
		check("map header", AppendMapLen(nil, n), lib(false, func(e *msgpack.Encoder) error { return e.EncodeMapLen(n) }))
	}
	check("nil bin", AppendBin(nil, nil), lib(false, func(e *msgpack.Encoder) error { return e.Encode([]byte(nil)) }))
	check("nil", AppendNil(nil), lib(false, func(e *msgpack.Encoder) error { return e.EncodeNil() }))
	check("appends", AppendStr([]byte{1, 2}, "x"), []byte{1, 2, 0xa1, 'x'})
}

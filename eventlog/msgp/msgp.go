// Package msgp appends msgpack values to a byte slice, byte for byte as
// github.com/vmihailenco/msgpack/v5 encodes them. The log's envelope and
// the delivery records are written with it: on those paths, msgpack's
// reflective encoder and the buffer it grows were a visible share of the
// CPU and of the garbage. Every caller keeps a test that holds its bytes
// equal to msgpack's own.
package msgp

import (
	"encoding/binary"
	"math"
)

// AppendUint appends n in msgpack's compact unsigned form (1 to 9
// bytes), as msgpack encodes an int that is not negative, or any integer
// with compact integers on.
func AppendUint(b []byte, n uint64) []byte {
	switch {
	case n <= math.MaxInt8:
		return append(b, byte(n))
	case n <= math.MaxUint8:
		return append(b, 0xcc, byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, 0xcd), uint16(n))
	case n <= math.MaxUint32:
		return binary.BigEndian.AppendUint32(append(b, 0xce), uint32(n))
	}
	return AppendUint64(b, n)
}

// AppendInt appends n in msgpack's compact signed form, as msgpack
// encodes an int.
func AppendInt(b []byte, n int64) []byte {
	switch {
	case n >= 0:
		return AppendUint(b, uint64(n))
	case n >= -32:
		return append(b, byte(n))
	case n >= math.MinInt8:
		return append(b, 0xd0, byte(n))
	case n >= math.MinInt16:
		return binary.BigEndian.AppendUint16(append(b, 0xd1), uint16(n))
	case n >= math.MinInt32:
		return binary.BigEndian.AppendUint32(append(b, 0xd2), uint32(n))
	}
	return AppendInt64(b, n)
}

// AppendUint64 appends n in 9 bytes, as msgpack encodes a uint64.
func AppendUint64(b []byte, n uint64) []byte {
	return binary.BigEndian.AppendUint64(append(b, 0xcf), n)
}

// AppendInt64 appends n in 9 bytes, as msgpack encodes an int64.
func AppendInt64(b []byte, n int64) []byte {
	return binary.BigEndian.AppendUint64(append(b, 0xd3), uint64(n))
}

// AppendStr appends s as a msgpack string.
func AppendStr(b []byte, s string) []byte {
	switch n := len(s); {
	case n < 32:
		b = append(b, 0xa0|byte(n))
	case n <= math.MaxUint8:
		b = append(b, 0xd9, byte(n))
	case n <= math.MaxUint16:
		b = binary.BigEndian.AppendUint16(append(b, 0xda), uint16(n))
	default:
		b = binary.BigEndian.AppendUint32(append(b, 0xdb), uint32(n))
	}
	return append(b, s...)
}

// AppendBin appends p as msgpack binary, or nil for a nil slice.
func AppendBin(b, p []byte) []byte {
	switch n := len(p); {
	case p == nil:
		return AppendNil(b)
	case n <= math.MaxUint8:
		b = append(b, 0xc4, byte(n))
	case n <= math.MaxUint16:
		b = binary.BigEndian.AppendUint16(append(b, 0xc5), uint16(n))
	default:
		b = binary.BigEndian.AppendUint32(append(b, 0xc6), uint32(n))
	}
	return append(b, p...)
}

// AppendMapLen appends the header of a map of n entries.
func AppendMapLen(b []byte, n int) []byte {
	switch {
	case n < 16:
		return append(b, 0x80|byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, 0xde), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(b, 0xdf), uint32(n))
}

// AppendNil appends msgpack's nil.
func AppendNil(b []byte) []byte { return append(b, 0xc0) }

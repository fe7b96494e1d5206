package eventlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"demosvc/eventlog/msgp"
)

// The record envelope is encoded and decoded by hand: it is a fixed
// nine-element msgpack array, and doing it directly, rather than through a
// general encoder, is what lets one writer keep up with hundreds of
// appenders and replay run at memory speed. The bytes are exactly what
// msgpack's own encoder writes with compact integers (a test holds the two
// equal), so any msgpack tool reads the log.

// appendTime appends t as the msgpack timestamp extension (type -1).
func appendTime(b []byte, t time.Time) []byte {
	secs := uint64(t.Unix())
	if secs>>34 == 0 {
		data := uint64(t.Nanosecond())<<34 | secs
		if data&0xffffffff00000000 == 0 {
			return binary.BigEndian.AppendUint32(append(b, 0xd6, 0xff), uint32(data))
		}
		return binary.BigEndian.AppendUint64(append(b, 0xd7, 0xff), data)
	}
	b = append(b, 0xc7, 12, 0xff)
	b = binary.BigEndian.AppendUint32(b, uint32(t.Nanosecond()))
	return binary.BigEndian.AppendUint64(b, secs)
}

// appendEnvelope appends the nine-element array header and the eight
// fields before the hash.
func appendEnvelope(b []byte, r *Record) []byte {
	b = append(b, arrayWithHash)
	b = msgp.AppendUint(b, r.Seq)
	b = msgp.AppendStr(b, r.ID)
	b = msgp.AppendStr(b, r.Type)
	b = msgp.AppendInt(b, int64(r.Version))
	b = appendTime(b, r.Time.UTC())
	b = msgp.AppendStr(b, r.Account)
	b = msgp.AppendStr(b, r.Actor)
	return append(b, r.Payload...)
}

// reader walks a msgpack byte slice without copying.
type reader struct {
	b []byte
	i int
}

var errShortRecord = errors.New("record ends early")

func (r *reader) take(n int) ([]byte, error) {
	if n < 0 || r.i+n > len(r.b) {
		return nil, errShortRecord
	}
	s := r.b[r.i : r.i+n]
	r.i += n
	return s, nil
}

func (r *reader) byte() (byte, error) {
	s, err := r.take(1)
	if err != nil {
		return 0, err
	}
	return s[0], nil
}

// int reads any msgpack integer.
func (r *reader) int() (int64, error) {
	c, err := r.byte()
	if err != nil {
		return 0, err
	}
	switch {
	case c <= 0x7f:
		return int64(c), nil
	case c >= 0xe0:
		return int64(int8(c)), nil
	}
	var n int
	switch c {
	case 0xcc, 0xd0:
		n = 1
	case 0xcd, 0xd1:
		n = 2
	case 0xce, 0xd2:
		n = 4
	case 0xcf, 0xd3:
		n = 8
	default:
		return 0, fmt.Errorf("want an integer, found code %#x", c)
	}
	s, err := r.take(n)
	if err != nil {
		return 0, err
	}
	var u uint64
	for _, x := range s {
		u = u<<8 | uint64(x)
	}
	if c >= 0xd0 { // signed: sign-extend from n bytes
		shift := 64 - 8*uint(n)
		return int64(u<<shift) >> shift, nil
	}
	return int64(u), nil
}

// strBytes reads a string's bytes (a slice of r's buffer).
func (r *reader) strBytes() ([]byte, error) {
	c, err := r.byte()
	if err != nil {
		return nil, err
	}
	var n int
	switch {
	case c >= 0xa0 && c <= 0xbf:
		n = int(c & 0x1f)
	case c == 0xd9 || c == 0xda || c == 0xdb:
		w := 1 << (c - 0xd9)
		s, err := r.take(w)
		if err != nil {
			return nil, err
		}
		for _, x := range s {
			n = n<<8 | int(x)
		}
	default:
		return nil, fmt.Errorf("want a string, found code %#x", c)
	}
	return r.take(n)
}

// str reads a string.
func (r *reader) str() (string, error) {
	b, err := r.strBytes()
	return string(b), err
}

// strFrom reads a string, taking it from in when it is there.
func (r *reader) strFrom(in interned) (string, error) {
	b, err := r.strBytes()
	if err != nil || in == nil {
		return string(b), err
	}
	return in.of(b), nil
}

// interned keeps one copy of the few strings every record repeats (its
// type, account and actor), so that a read of the whole log allocates each
// once instead of once per record. It keeps at most maxInterned.
type interned map[string]string

const maxInterned = 1024

func (in interned) of(b []byte) string {
	if s, ok := in[string(b)]; ok {
		return s
	}
	s := string(b)
	if len(in) < maxInterned {
		in[s] = s
	}
	return s
}

func (r *reader) time() (time.Time, error) {
	c, err := r.byte()
	if err != nil {
		return time.Time{}, err
	}
	var n int
	switch c {
	case 0xd6:
		n = 4
	case 0xd7:
		n = 8
	case 0xc7:
		l, err := r.byte()
		if err != nil {
			return time.Time{}, err
		}
		n = int(l)
	default:
		return time.Time{}, fmt.Errorf("want a timestamp, found code %#x", c)
	}
	if typ, err := r.byte(); err != nil || typ != 0xff {
		return time.Time{}, errors.New("want a timestamp extension (type -1)")
	}
	s, err := r.take(n)
	if err != nil {
		return time.Time{}, err
	}
	switch n {
	case 4:
		return time.Unix(int64(binary.BigEndian.Uint32(s)), 0).UTC(), nil
	case 8:
		d := binary.BigEndian.Uint64(s)
		return time.Unix(int64(d&(1<<34-1)), int64(d>>34)).UTC(), nil
	case 12:
		return time.Unix(int64(binary.BigEndian.Uint64(s[4:])), int64(binary.BigEndian.Uint32(s))).UTC(), nil
	}
	return time.Time{}, fmt.Errorf("timestamp of %d bytes", n)
}

package eventlog

import "math"

// Decoding payloads without reflection. msgpack's reflective decoder costs
// about half of a full replay; the payload types read most often decode
// their own bytes instead (projections/decoders.go), through a
// PayloadReader. Such a decoder understands only the form this service
// writes (a map of string keys in any order, compact integers, strings,
// nil for an absent pointer) and says no to anything else: the registry
// then decodes the same bytes through reflection, so what a payload
// decodes to never depends on which decoder ran. Tests hold the two equal
// on random payloads and random bytes.

// PayloadDecoder is implemented by a payload type that decodes its stored
// msgpack form itself. DecodePayload fills the (zero) receiver from r and
// returns false, leaving the receiver to be discarded, when the bytes are
// not in the form it knows, an unknown field included.
type PayloadDecoder interface {
	DecodePayload(r *PayloadReader) bool
}

// PayloadEncoder is implemented by a payload type that encodes itself:
// AppendPayload appends exactly the bytes MarshalPayloadReflective writes
// for the receiver (the payload types' tests hold them equal), without
// reflection or a buffer of its own. The log's writer encodes every
// payload, so on the write path reflection was about a percent of a
// request's CPU.
type PayloadEncoder interface {
	AppendPayload(b []byte) []byte
}

// PayloadReader reads msgpack values from a payload without copying,
// except for the strings it returns. Each method returns false, and
// consumes nothing that matters, when the next value is not of its kind.
type PayloadReader struct{ r reader }

// NewPayloadReader reads b.
func NewPayloadReader(b []byte) *PayloadReader { return &PayloadReader{r: reader{b: b}} }

// Map reads a map header and returns its number of entries.
func (p *PayloadReader) Map() (int, bool) {
	c, err := p.r.byte()
	if err != nil {
		return 0, false
	}
	switch {
	case c >= 0x80 && c <= 0x8f:
		return int(c & 0x0f), true
	case c == 0xde:
		s, err := p.r.take(2)
		if err != nil {
			return 0, false
		}
		return int(s[0])<<8 | int(s[1]), true
	}
	return 0, false
}

// Key reads a string map key without copying it: the bytes are valid
// until the reader is dropped.
func (p *PayloadReader) Key() ([]byte, bool) {
	n, ok := p.strLen()
	if !ok {
		return nil, false
	}
	s, err := p.r.take(n)
	return s, err == nil
}

func (p *PayloadReader) strLen() (int, bool) {
	c, err := p.r.byte()
	if err != nil {
		return 0, false
	}
	switch {
	case c >= 0xa0 && c <= 0xbf:
		return int(c & 0x1f), true
	case c == 0xd9 || c == 0xda || c == 0xdb:
		s, err := p.r.take(1 << (c - 0xd9))
		if err != nil {
			return 0, false
		}
		n := 0
		for _, x := range s {
			n = n<<8 | int(x)
		}
		return n, true
	}
	return 0, false
}

// Str reads a string.
func (p *PayloadReader) Str() (string, bool) {
	n, ok := p.strLen()
	if !ok {
		return "", false
	}
	s, err := p.r.take(n)
	return string(s), err == nil
}

// Int reads an integer that fits an int.
func (p *PayloadReader) Int() (int, bool) {
	if p.r.i < len(p.r.b) && p.r.b[p.r.i] == 0xcf {
		// A uint64 above MaxInt64 would wrap: left to the reflective decoder.
		if s := p.r.b[p.r.i+1:]; len(s) >= 8 && s[0]&0x80 != 0 {
			return 0, false
		}
	}
	n, err := p.r.int()
	if err != nil || n < math.MinInt || n > math.MaxInt {
		return 0, false
	}
	return int(n), true
}

// Nil consumes a nil and reports true, or consumes nothing and reports
// false when the next value is something else.
func (p *PayloadReader) Nil() bool {
	if p.r.i < len(p.r.b) && p.r.b[p.r.i] == 0xc0 {
		p.r.i++
		return true
	}
	return false
}

// StrPtr reads nil as nil, or a string as a pointer to it.
func (p *PayloadReader) StrPtr() (*string, bool) {
	if p.Nil() {
		return nil, true
	}
	s, ok := p.Str()
	return &s, ok
}

// IntPtr reads nil as nil, or an integer as a pointer to it.
func (p *PayloadReader) IntPtr() (*int, bool) {
	if p.Nil() {
		return nil, true
	}
	n, ok := p.Int()
	return &n, ok
}

// End reports whether every byte was read.
func (p *PayloadReader) End() bool { return p.r.i == len(p.r.b) }

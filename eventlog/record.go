package eventlog

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// HashSize is the length of a record's chain hash.
const HashSize = sha256.Size

// Record is one event as stored in the log.
//
// On disk a record is a msgpack array of nine elements, in this order: seq,
// id, type, version, time, account, actor, payload, hash. The hash is always
// the last element, a 32-byte bin, so the stored value ends in the three
// bytes 0xc4 0x20 followed by the hash. The chain rule is
//
//	hash = SHA-256(prev_hash || record without hash)
//
// where "record without hash" is the same array encoded with eight elements:
// the stored bytes with the array header 0x99 replaced by 0x98 and the last
// 34 bytes dropped. prev_hash of the first record is 32 zero bytes.
type Record struct {
	Seq     uint64
	ID      string
	Type    string
	Version int
	Time    time.Time // UTC
	Account string
	Actor   string
	Payload msgpack.RawMessage // one msgpack value: the event's data
	Hash    [HashSize]byte
}

const (
	arrayWithHash    = 0x99 // msgpack fixarray of 9
	arrayWithoutHash = 0x98 // msgpack fixarray of 8
	hashTrailerLen   = 2 + HashSize
)

// ErrCorrupt reports a stored record that cannot be decoded or whose hash
// does not continue the chain.
var ErrCorrupt = errors.New("corrupt record")

// encodeRecord encodes r, computes its chain hash from prev and returns
// the complete stored value, with r.Hash set.
func encodeRecord(r *Record, prev [HashSize]byte) ([]byte, error) {
	return appendRecord(nil, r, prev)
}

// appendRecord is encodeRecord appending to dst, which must not overlap
// r's fields.
func appendRecord(dst []byte, r *Record, prev [HashSize]byte) ([]byte, error) {
	if len(r.Payload) == 0 {
		return nil, fmt.Errorf("record %d: empty payload", r.Seq)
	}
	size := 1 + 9 + 5 + len(r.ID) + 5 + len(r.Type) + 9 + 15 + 5 + len(r.Account) + 5 + len(r.Actor) + len(r.Payload) + hashTrailerLen
	dst = slices.Grow(dst, size)
	start := len(dst)
	out := appendEnvelope(dst, r)
	r.Hash = chainHash(prev, out[start:])
	out = append(out, 0xc4, HashSize)
	return append(out, r.Hash[:]...), nil
}

// chainHash computes SHA-256(prev || body-as-eight-element-array), where body
// is a nine-element array encoding without the hash element.
func chainHash(prev [HashSize]byte, body []byte) [HashSize]byte {
	h := sha256.New()
	h.Write(prev[:])
	h.Write([]byte{arrayWithoutHash})
	h.Write(body[1:])
	var sum [HashSize]byte
	h.Sum(sum[:0])
	return sum
}

// splitValue checks the framing of a stored value and returns the record
// body (still carrying the nine-element header) and its stored hash.
func splitValue(v []byte) (body []byte, hash [HashSize]byte, err error) {
	n := len(v)
	if n < 1+hashTrailerLen || v[0] != arrayWithHash || v[n-hashTrailerLen] != 0xc4 || v[n-hashTrailerLen+1] != HashSize {
		return nil, hash, fmt.Errorf("%w: bad framing", ErrCorrupt)
	}
	copy(hash[:], v[n-HashSize:])
	return v[:n-hashTrailerLen], hash, nil
}

// decodeRecord decodes a stored value. It checks the framing but not the
// chain; Verify does that. r.Payload aliases v. Its type, account and
// actor come from in when it has them (in may be nil).
func decodeRecord(v []byte, r *Record, in interned) error {
	body, hash, err := splitValue(v)
	if err != nil {
		return err
	}
	rd := reader{b: body, i: 1} // past the array header splitValue checked
	seq, err := rd.int()
	if err == nil {
		r.Seq = uint64(seq)
		r.ID, err = rd.str()
	}
	if err == nil {
		r.Type, err = rd.strFrom(in)
	}
	var version int64
	if err == nil {
		version, err = rd.int()
	}
	if err == nil {
		r.Time, err = rd.time()
	}
	if err == nil {
		r.Account, err = rd.strFrom(in)
	}
	if err == nil {
		r.Actor, err = rd.strFrom(in)
	}
	if err != nil {
		return fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	// The payload is the last element before the hash: the rest of the
	// body. Decoding it (Registry.DecodeStored) checks it.
	if rd.i >= len(body) {
		return fmt.Errorf("%w: no payload", ErrCorrupt)
	}
	r.Version = int(version)
	r.Payload = body[rd.i:]
	r.Hash = hash
	return nil
}

// Keyspaces. The log alone is the truth; every other keyspace is derived
// state or bookkeeping that can be rebuilt from it.
const (
	prefixLog  byte = 'l' // 'l' + seq (8 bytes, big-endian) -> record
	prefixMeta byte = 'm' // 'm' + name -> bookkeeping values

	// KeyspaceIdempotency holds recorded responses to Idempotency-Key
	// requests: 'i' + account + 0x00 + key.
	KeyspaceIdempotency byte = 'i'
	// KeyspaceSnapshot holds projection snapshots.
	KeyspaceSnapshot byte = 's'
	// KeyspaceDelivery holds webhook cursors and retry state.
	KeyspaceDelivery byte = 'd'
	// KeyspaceLog is the log itself, for DiskUsage; only Log reads it.
	KeyspaceLog = prefixLog
)

func logKey(seq uint64) []byte {
	k := make([]byte, 9)
	k[0] = prefixLog
	binary.BigEndian.PutUint64(k[1:], seq)
	return k
}

func seqFromKey(k []byte) (uint64, bool) {
	if len(k) != 9 || k[0] != prefixLog {
		return 0, false
	}
	return binary.BigEndian.Uint64(k[1:]), true
}

package eventlog

import (
	crand "crypto/rand"
	"io"
	mrand "math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"
)

// Clock returns the current time. Production uses time.Now; golden tests
// inject a fixed clock so that their output is byte-for-byte stable.
type Clock func() time.Time

// FixedClock returns a clock that always answers t.
func FixedClock(t time.Time) Clock { return func() time.Time { return t } }

// IDs mints identifiers of the form prefix + 26 lowercase ULID characters,
// which sort by creation time. It is safe for concurrent use.
type IDs struct {
	mu      sync.Mutex
	clock   Clock
	entropy *ulid.MonotonicEntropy
	random  io.Reader // for secrets: crypto/rand unless seeded
	// next is New's ULID as it is minted, under mu: ulid.New hands its
	// local's entropy bytes to the source through an interface, so that
	// local escaped, an allocation per id (three a session started).
	next ulid.ULID
}

// NewIDs returns an ID source reading clock, with cryptographically random
// entropy.
func NewIDs(clock Clock) *IDs {
	return &IDs{clock: clock, entropy: ulid.Monotonic(crand.Reader, 0), random: crand.Reader}
}

// NewSeededIDs returns an ID source whose IDs and random bytes are a
// function of seed and the clock alone. It exists for deterministic golden
// tests; production must never use it, since its secrets are guessable.
func NewSeededIDs(clock Clock, seed int64) *IDs {
	s := &IDs{clock: clock}
	s.Reseed(seed)
	return s
}

// Reseed restarts a seeded source from seed. A process in test mode
// reseeds with the log's head mixed in, so a restart does not mint the ids
// of the previous run again. It must not be called on a crypto source.
func (s *IDs) Reseed(seed int64) {
	var key [32]byte
	for i := 0; i < 8; i++ {
		key[i] = byte(seed >> (8 * i))
	}
	src := &lockedReader{r: mrand.NewChaCha8(key)}
	s.mu.Lock()
	s.entropy, s.random = ulid.Monotonic(src, 0), src
	s.mu.Unlock()
}

// New returns a fresh identifier carrying prefix, for example "evt_".
func (s *IDs) New(prefix string) string {
	s.mu.Lock()
	ms := ulid.Timestamp(s.clock())
	err := s.next.SetTime(ms) // what ulid.New does
	if err == nil {
		err = s.entropy.MonotonicRead(ms, s.next[6:])
	}
	id := s.next
	s.mu.Unlock()
	if err != nil {
		// Only reachable after 2^80 IDs in one millisecond; entropy
		// sources here never fail.
		panic("eventlog: minting id: " + err.Error())
	}
	return FormatID(prefix, id)
}

// AppendID appends prefix and id's 26 characters in lowercase, the form of
// every id demosvc shows, without allocating beyond dst's growth.
func AppendID(dst []byte, prefix string, id ulid.ULID) []byte {
	dst = append(dst, prefix...)
	dst = slices.Grow(dst, ulid.EncodedSize)
	e := dst[len(dst) : len(dst)+ulid.EncodedSize]
	// Crockford base32 of the 128 bits, 5 bits a character from the top
	// (the first character carries the top 3), written lowercase directly:
	// ulid's own encoder writes uppercase, which every id in every answer
	// would then have to lower. Unrolled as ulid's MarshalTextTo is: a
	// list of 20 sessions encodes 60 ids.
	const c = lowerCrockford
	e[0] = c[(id[0]&224)>>5]
	e[1] = c[id[0]&31]
	e[2] = c[(id[1]&248)>>3]
	e[3] = c[((id[1]&7)<<2)|((id[2]&192)>>6)]
	e[4] = c[(id[2]&62)>>1]
	e[5] = c[((id[2]&1)<<4)|((id[3]&240)>>4)]
	e[6] = c[((id[3]&15)<<1)|((id[4]&128)>>7)]
	e[7] = c[(id[4]&124)>>2]
	e[8] = c[((id[4]&3)<<3)|((id[5]&224)>>5)]
	e[9] = c[id[5]&31]
	e[10] = c[(id[6]&248)>>3]
	e[11] = c[((id[6]&7)<<2)|((id[7]&192)>>6)]
	e[12] = c[(id[7]&62)>>1]
	e[13] = c[((id[7]&1)<<4)|((id[8]&240)>>4)]
	e[14] = c[((id[8]&15)<<1)|((id[9]&128)>>7)]
	e[15] = c[(id[9]&124)>>2]
	e[16] = c[((id[9]&3)<<3)|((id[10]&224)>>5)]
	e[17] = c[id[10]&31]
	e[18] = c[(id[11]&248)>>3]
	e[19] = c[((id[11]&7)<<2)|((id[12]&192)>>6)]
	e[20] = c[(id[12]&62)>>1]
	e[21] = c[((id[12]&1)<<4)|((id[13]&240)>>4)]
	e[22] = c[((id[13]&15)<<1)|((id[14]&128)>>7)]
	e[23] = c[(id[14]&124)>>2]
	e[24] = c[((id[14]&3)<<3)|((id[15]&224)>>5)]
	e[25] = c[id[15]&31]
	return dst[:len(dst)+ulid.EncodedSize]
}

const lowerCrockford = "0123456789abcdefghjkmnpqrstvwxyz"

// FormatID returns prefix and id's 26 characters in lowercase, in one
// allocation for a prefix of up to 8 bytes.
func FormatID(prefix string, id ulid.ULID) string {
	var buf [8 + ulid.EncodedSize]byte
	return string(AppendID(buf[:0], prefix, id))
}

// Random returns n random bytes: cryptographically random unless the source
// was seeded for tests.
func (s *IDs) Random(n int) []byte {
	b := make([]byte, n)
	if _, err := io.ReadFull(s.random, b); err != nil {
		panic("eventlog: reading random bytes: " + err.Error())
	}
	return b
}

// Reader returns the source's random byte stream.
func (s *IDs) Reader() io.Reader { return s.random }

// Now returns the source's clock reading, in UTC.
func (s *IDs) Now() time.Time { return s.clock().UTC() }

type lockedReader struct {
	mu sync.Mutex
	r  io.Reader
}

func (l *lockedReader) Read(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.Read(p)
}

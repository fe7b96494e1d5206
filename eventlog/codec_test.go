package eventlog

import (
	"bytes"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// libraryEnvelope is the envelope as msgpack's own encoder writes it with
// compact integers: the reference the hand-written codec must equal.
func libraryEnvelope(t *testing.T, r *Record) []byte {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.UseCompactInts(true)
	for _, err := range []error{
		enc.EncodeArrayLen(9), enc.EncodeUint(r.Seq), enc.EncodeString(r.ID), enc.EncodeString(r.Type),
		enc.EncodeInt(int64(r.Version)), enc.EncodeTime(r.Time.UTC()), enc.EncodeString(r.Account), enc.EncodeString(r.Actor),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	buf.Write(r.Payload)
	return buf.Bytes()
}

func TestCodecEqualsTheMsgpackLibrary(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	ints := []uint64{0, 1, 127, 128, 255, 256, 65535, 65536, math.MaxUint32, math.MaxUint32 + 1, math.MaxUint64}
	versions := []int{0, 1, 31, 127, 128, 70000, -1, -32, -33, -128, -129, -40000, math.MinInt32, math.MinInt32 - 1}
	times := []time.Time{
		time.Unix(0, 0), time.Unix(1<<32-1, 0), time.Unix(1<<32, 0), time.Unix(1<<34-1, 999999999),
		time.Unix(1<<34, 5), time.Unix(-1, 0), time.Date(2026, 11, 21, 12, 0, 0, 123456789, time.UTC),
		time.Date(2026, 11, 21, 12, 0, 0, 0, time.FixedZone("x", 3600)),
	}
	lens := []int{0, 1, 31, 32, 255, 256, 65535, 65536}
	// The first records give every string field every length class in
	// turn; random ones follow. The 64 KiB strings are what this test's
	// time goes to under -race, so there are a few hundred, not thousands.
	const records = 300
	i := 0
	str := func() string {
		n := lens[rng.IntN(len(lens))]
		if i < len(lens) {
			n = lens[i]
		}
		return strings.Repeat("é", rng.IntN(3)) + strings.Repeat("a", n)
	}
	payload, _ := msgpack.Marshal(map[string]any{"a": 1})
	for ; i < records; i++ {
		r := &Record{
			Seq: ints[rng.IntN(len(ints))], ID: str(), Type: str(), Version: versions[rng.IntN(len(versions))],
			Time: times[rng.IntN(len(times))], Account: str(), Actor: str(), Payload: payload,
		}
		want := libraryEnvelope(t, r)
		got := appendEnvelope(nil, r)
		if !bytes.Equal(got, want) {
			t.Fatalf("record %d (%d, v%d, %v): hand encoding differs from msgpack's:\n got  %x\n want %x", i, r.Seq, r.Version, r.Time, got[:min(40, len(got))], want[:min(40, len(want))])
		}
		val, err := encodeRecord(r, [HashSize]byte{})
		if err != nil {
			t.Fatal(err)
		}
		var back Record
		if err := decodeRecord(val, &back, nil); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if back.Seq != r.Seq || back.ID != r.ID || back.Type != r.Type || back.Version != r.Version ||
			!back.Time.Equal(r.Time) || back.Account != r.Account || back.Actor != r.Actor ||
			!bytes.Equal(back.Payload, r.Payload) || back.Hash != r.Hash {
			t.Fatalf("record %d did not round-trip: %+v", i, back)
		}
	}
}

func TestDecodeRefusesTruncatedRecords(t *testing.T) {
	r := &Record{Seq: 7, ID: "evt_x", Type: "note", Version: 1, Time: testTime, Account: "acc", Actor: "cli", Payload: []byte{0x80}}
	val, _ := encodeRecord(r, [HashSize]byte{})
	body := val[:len(val)-hashTrailerLen]
	for cut := 1; cut < len(body); cut++ {
		bad := append(append([]byte(nil), body[:cut]...), val[len(val)-hashTrailerLen:]...)
		var back Record
		if err := decodeRecord(bad, &back, nil); err == nil && cut < len(body)-1 {
			// Cutting into the payload still parses the envelope; the
			// payload's own decode refuses it. Before that, it must fail.
			if cut < len(body)-len(r.Payload) {
				t.Errorf("a record cut at %d of %d bytes decoded", cut, len(body))
			}
		}
	}
}

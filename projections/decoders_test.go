package projections

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"demosvc/eventlog"
)

// The hand-written decoders (decoders.go) against msgpack's reflection,
// on the bytes the service writes for random payloads, and on those bytes
// damaged at random: whenever a decoder accepts bytes, reflection decodes
// them to an equal value.

var fastDecoded = []any{
	&AgentCreated{}, &AgentUpdated{}, &ContactCreated{}, &SessionStarted{}, &SessionProgressed{},
	&LeadHot{}, &SessionCompleted{}, &SessionAbandoned{}, &MeetingBooked{},
}

func TestDecodersMatchReflection(t *testing.T) {
	reg := NewRegistry()
	rng := rand.New(rand.NewPCG(1, 2))
	for _, proto := range fastDecoded {
		typ := reflect.TypeOf(proto).Elem()
		t.Run(typ.Name(), func(t *testing.T) {
			for i := range 300 {
				payload := randomValue(typ, rng)
				name, version, data, err := reg.Encode(payload)
				if err != nil {
					t.Fatal(err)
				}
				rec := &eventlog.Record{Seq: 1, Type: name, Version: version, Payload: data}
				fast := reflect.New(typ).Interface().(eventlog.PayloadDecoder)
				if r := eventlog.NewPayloadReader(data); !fast.DecodePayload(r) || !r.End() {
					t.Fatalf("payload %d: the decoder refuses the bytes the service writes for %#v", i, payload)
				}
				slow, err := reg.DecodeStoredReflective(rec)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(fast, slow) {
					t.Fatalf("payload %d decodes differently:\nhand-written %#v\nreflection   %#v", i, fast, slow)
				}
				// The registry takes the fast path and returns the same.
				if got, err := reg.DecodeStored(rec); err != nil || !reflect.DeepEqual(got, slow) {
					t.Fatalf("DecodeStored = %#v, %v", got, err)
				}
				for range 4 {
					checkDamaged(t, reg, rec, damage(data, rng))
				}
			}
		})
	}
}

// checkDamaged holds the decoders to reflection on arbitrary bytes: when
// the hand-written decoder accepts them, reflection must too, with an equal
// value; otherwise DecodeStored gives what reflection gives.
func checkDamaged(t *testing.T, reg *eventlog.Registry, rec *eventlog.Record, data []byte) {
	t.Helper()
	bad := *rec
	bad.Payload = data
	slow, slowErr := reg.DecodeStoredReflective(&bad)
	got, err := reg.DecodeStored(&bad)
	if (err == nil) != (slowErr == nil) || (err == nil && !reflect.DeepEqual(got, slow)) {
		t.Fatalf("bytes %x: DecodeStored = %#v, %v; reflection = %#v, %v", data, got, err, slow, slowErr)
	}
}

// damage returns a copy of b with a few random bytes changed, cut or added.
func damage(b []byte, rng *rand.Rand) []byte {
	out := append([]byte(nil), b...)
	switch rng.IntN(4) {
	case 0:
		if len(out) > 0 {
			out = out[:rng.IntN(len(out))]
		}
	case 1:
		out = append(out, byte(rng.IntN(256)))
	default:
		for range 1 + rng.IntN(3) {
			if len(out) > 0 {
				out[rng.IntN(len(out))] = byte(rng.IntN(256))
			}
		}
	}
	return out
}

// randomValue returns a pointer to a random value of t (a payload struct).
func randomValue(t reflect.Type, rng *rand.Rand) any {
	v := reflect.New(t)
	fill(v.Elem(), rng)
	return v.Interface()
}

func fill(v reflect.Value, rng *rand.Rand) {
	switch v.Kind() {
	case reflect.String:
		v.SetString(randomString(rng))
	case reflect.Int:
		v.SetInt(randomInt(rng))
	case reflect.Pointer:
		if rng.IntN(3) == 0 {
			return // nil
		}
		p := reflect.New(v.Type().Elem())
		fill(p.Elem(), rng)
		v.Set(p)
	case reflect.Struct:
		for i := range v.NumField() {
			fill(v.Field(i), rng)
		}
	default:
		panic("no random " + v.Kind().String())
	}
}

// randomInt covers every msgpack integer width, both signs.
func randomInt(rng *rand.Rand) int64 {
	switch rng.IntN(5) {
	case 0:
		return int64(rng.IntN(200)) - 40
	case 1:
		return int64(rng.Uint32()) - 1<<31
	case 2:
		return int64(rng.Uint64())
	default:
		return int64(rng.IntN(101))
	}
}

// randomString covers every msgpack string width, ASCII and beyond.
func randomString(rng *rand.Rand) string {
	n := []int{0, 1, 5, 26, 31, 32, 100, 255, 256, 300, 70000}[rng.IntN(11)]
	if n == 70000 && rng.IntN(50) != 0 {
		n = 40
	}
	var b strings.Builder
	for b.Len() < n {
		if rng.IntN(8) == 0 {
			b.WriteRune(rune(0x80 + rng.IntN(0x2000)))
		} else {
			b.WriteByte(byte(' ' + rng.IntN(95)))
		}
	}
	return b.String()
}

// FuzzPayloadDecoders: for any bytes, and any payload type with a
// hand-written decoder, DecodeStored gives what reflection gives.
func FuzzPayloadDecoders(f *testing.F) {
	reg := NewRegistry()
	rng := rand.New(rand.NewPCG(3, 4))
	for i, proto := range fastDecoded {
		_, _, data, err := reg.Encode(randomValue(reflect.TypeOf(proto).Elem(), rng))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint8(i), data)
	}
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		name, version, _ := reg.Schema(fastDecoded[int(which)%len(fastDecoded)])
		checkDamaged(t, reg, &eventlog.Record{Seq: 1, Type: name, Version: version}, data)
	})
}

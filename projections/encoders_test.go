package projections

import (
	"bytes"
	"math/rand/v2"
	"reflect"
	"testing"

	"demosvc/eventlog"
)

// The hand-written encoders (encoders.go) write, for random payloads of
// every type that has one, the bytes msgpack's reflection writes, and the
// registry takes them.
func TestEncodersMatchReflection(t *testing.T) {
	reg := NewRegistry()
	rng := rand.New(rand.NewPCG(3, 4))
	for _, proto := range fastDecoded {
		typ := reflect.TypeOf(proto).Elem()
		t.Run(typ.Name(), func(t *testing.T) {
			if _, ok := proto.(eventlog.PayloadEncoder); !ok {
				t.Fatalf("%s has a decoder but no encoder", typ.Name())
			}
			for i := range 300 {
				payload := randomValue(typ, rng)
				want, err := eventlog.MarshalPayloadReflective(payload)
				if err != nil {
					t.Fatal(err)
				}
				if got := payload.(eventlog.PayloadEncoder).AppendPayload([]byte("kept")); !bytes.Equal(got, append([]byte("kept"), want...)) {
					t.Fatalf("payload %d %#v:\nhand-written %x\nreflection   %x", i, payload, got, want)
				}
				if _, _, data, err := reg.Encode(payload); err != nil || !bytes.Equal(data, want) {
					t.Fatalf("payload %d: Encode = %x, %v; want %x", i, data, err, want)
				}
			}
		})
	}
	// The registry encodes through AppendPayload: one allocation, the
	// buffer, where reflection makes several.
	p := &SessionStarted{SessionID: "ses_01", AgentID: "agt_01", ContactID: "cnt_01"}
	if n := testing.AllocsPerRun(100, func() { _, _, _, _ = reg.Encode(p) }); n > 1 {
		t.Errorf("Encode made %.0f allocations, want 1", n)
	}
}

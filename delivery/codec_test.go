package delivery

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// randomCodecValues draws strings, byte slices and integers across every
// boundary between msgpack's encodings.
type randomCodecValues struct{ rng *rand.Rand }

func (r randomCodecValues) str() string {
	return strings.Repeat("é", r.rng.IntN(2)) + strings.Repeat("a", []int{0, 1, 31, 32, 255, 256, 70000}[r.rng.IntN(7)])
}

func (r randomCodecValues) bin() []byte {
	switch n := []int{-1, 0, 1, 255, 256, 70000}[r.rng.IntN(6)]; n {
	case -1:
		return nil
	default:
		return bytes.Repeat([]byte{'b'}, n)
	}
}

func (r randomCodecValues) int() int64 {
	return []int64{0, 1, 127, 128, -1, -33, 65536, math.MaxInt32 + 1, math.MinInt64, math.MaxInt64, r.rng.Int64()}[r.rng.IntN(11)]
}

// appendDelivery writes what msgpack.Marshal writes, byte for byte, and
// encode's puts are the keys and values the store reads.
func TestDeliveryEncodingIsMsgpacks(t *testing.T) {
	r := randomCodecValues{rand.New(rand.NewPCG(1, 2))}
	var ds []*Delivery
	for i := 0; i < 200; i++ {
		d := &Delivery{ID: r.str(), WebhookID: r.str(), EventID: r.str(), Event: r.str(), Seq: uint64(r.int()),
			Body: r.bin(), Status: r.str(), Attempts: int(r.int()), LastStatusCode: int(r.int()), LastError: r.str(),
			NextAttemptAt: r.int(), CreatedAt: r.int(), EventAt: r.int(), UpdatedAt: r.int(), Serial: int(r.int())}
		want, err := msgpack.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendDelivery(nil, d); !bytes.Equal(got, want) {
			t.Fatalf("delivery %d: hand encoding differs from msgpack's:\n got  %x\n want %x", i, got[:min(64, len(got))], want[:min(64, len(want))])
		}
		if got := len(want); got > deliverySize(d) {
			t.Fatalf("delivery %d: %d bytes, more than deliverySize's %d", i, got, deliverySize(d))
		}
		ds = append(ds, d)
	}
	for _, indexed := range []bool{false, true} {
		w := encode("wh_1", ds, indexed, nil)
		puts := w.puts
		if want := len(ds) * (1 + btoi(indexed)); len(puts) != want || cap(puts) < want+1 {
			t.Fatalf("indexed %v: %d puts (room for %d), want %d and room for one more", indexed, len(puts), cap(puts), want)
		}
		for i, d := range ds {
			p := puts[i*(1+btoi(indexed))]
			if !bytes.Equal(p.Key, deliveryKey("wh_1", d.ID)) || !bytes.Equal(p.Value, appendDelivery(nil, d)) {
				t.Fatalf("indexed %v, put %d: key %q, not the delivery's", indexed, i, p.Key)
			}
			if indexed {
				ix := puts[2*i+1]
				if !bytes.Equal(ix.Key, eventIndexKey("wh_1", d.Seq, d.ID)) || ix.Value != nil {
					t.Fatalf("put %d: key %q, not the delivery's event index entry", 2*i+1, ix.Key)
				}
			}
			// The slices share one buffer: none may reach into the next.
			if cap(p.Key) != len(p.Key) || cap(p.Value) != len(p.Value) {
				t.Fatalf("put %d: key or value can be appended to over its neighbour", i)
			}
		}
		w.release()
	}
}

// An attempt's answer header, kept as read, is written as the map of its
// names to their values joined with ", ", and reads back as that map; its
// request headers, kept as set (sentHeaders), as the map of them.
func TestAttemptAnswerHeaderIsWrittenAsItsMap(t *testing.T) {
	r := randomCodecValues{rand.New(rand.NewPCG(5, 6))}
	for i := 0; i < 300; i++ {
		h := http.Header{}
		want := map[string]string{}
		names := r.rng.IntN(5)
		if i == 0 {
			names = 200 // past the slack of the other fields' bounds
		}
		for j := names; j > 0; j-- {
			k := r.str() + strconv.Itoa(j)
			var vs []string
			for n := 1 + r.rng.IntN(3); n > 0; n-- {
				vs = append(vs, r.str())
			}
			h[k], want[k] = vs, strings.Join(vs, ", ")
		}
		a := &Attempt{N: int(r.int()), StatusCode: int(r.int()), answer: h, ResponseBody: r.bin()}
		sent := map[string]string{}
		for j := r.rng.IntN(len(a.sent.kv)/2 + 1); j > 0; j-- {
			k, v := r.str()+strconv.Itoa(j), r.str()
			a.sent.add(k, v)
			sent[k] = v
		}
		got := appendAttempt(nil, a)
		var back Attempt
		if err := msgpack.Unmarshal(got, &back); err != nil {
			t.Fatalf("attempt %d: %v", i, err)
		}
		if !reflect.DeepEqual(back.ResponseHeaders, want) || back.N != a.N || !bytes.Equal(back.ResponseBody, a.ResponseBody) {
			t.Fatalf("attempt %d did not read back equal: %d names, want %d", i, len(back.ResponseHeaders), len(want))
		}
		if len(sent) == 0 {
			sent = nil // none set: written as no map
		}
		if !reflect.DeepEqual(back.RequestHeaders, sent) {
			t.Fatalf("attempt %d: request headers read back as %v, want %v", i, back.RequestHeaders, sent)
		}
		if len(got) > attemptSize(a) {
			t.Fatalf("attempt %d: %d bytes, more than attemptSize's %d", i, len(got), attemptSize(a))
		}
	}
}

// appendAttempt writes what msgpack.Marshal writes (header maps of more
// than one entry in whichever order: msgpack leaves that to the map too),
// and every attempt reads back equal.
func TestAttemptEncodingIsMsgpacks(t *testing.T) {
	r := randomCodecValues{rand.New(rand.NewPCG(3, 4))}
	headers := func() map[string]string {
		n := r.rng.IntN(5) - 1
		if n < 0 {
			return nil
		}
		h := map[string]string{}
		for i := 0; i < n; i++ {
			h[r.str()+string(rune('A'+i))] = r.str()
		}
		return h
	}
	var kept []keptAttempt
	for i := 0; i < 300; i++ {
		a := &Attempt{N: int(r.int()), StartedAt: r.int(), DurationMS: r.int(), StatusCode: int(r.int()), Error: r.str(),
			RequestHeaders: headers(), ResponseHeaders: headers(), ResponseBody: r.bin()}
		got := appendAttempt(nil, a)
		if len(a.RequestHeaders) <= 1 && len(a.ResponseHeaders) <= 1 {
			want, err := msgpack.Marshal(a)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("attempt %d: hand encoding differs from msgpack's:\n got  %x\n want %x", i, got[:min(64, len(got))], want[:min(64, len(want))])
			}
		}
		var back Attempt
		if err := msgpack.Unmarshal(got, &back); err != nil {
			t.Fatalf("attempt %d: %v", i, err)
		}
		if !reflect.DeepEqual(&back, a) {
			t.Fatalf("attempt %d did not read back equal: got n=%d, %d and %d headers; want n=%d, %d and %d", i,
				back.N, len(back.RequestHeaders), len(back.ResponseHeaders), a.N, len(a.RequestHeaders), len(a.ResponseHeaders))
		}
		if len(got) > attemptSize(a) {
			t.Fatalf("attempt %d: %d bytes, more than attemptSize's %d", i, len(got), attemptSize(a))
		}
		kept = append(kept, keptAttempt{id: fmt.Sprintf("dlv_%d", i), detail: *a})
	}
	// A write's attempts follow its deliveries, in one buffer that
	// encode's estimate holds without moving any put's bytes.
	d := &Delivery{ID: "dlv_x", Body: []byte("{}")}
	w := encode("wh_1", []*Delivery{d}, false, kept)
	defer w.release()
	if len(w.puts) != 1+len(kept) || !bytes.Equal(w.puts[0].Value, appendDelivery(nil, d)) {
		t.Fatalf("%d puts, want the delivery then %d attempts", len(w.puts), len(kept))
	}
	for i, p := range w.puts[1:] {
		a := &kept[i]
		if !bytes.Equal(p.Key, attemptKey("wh_1", a.id, a.detail.N)) {
			t.Fatalf("attempt %d: key %q, not the attempt's", i, p.Key)
		}
		var back Attempt
		if err := msgpack.Unmarshal(p.Value, &back); err != nil || !reflect.DeepEqual(back, a.detail) {
			t.Fatalf("attempt %d did not read back from its put (%v)", i, err)
		}
		if cap(p.Key) != len(p.Key) || cap(p.Value) != len(p.Value) {
			t.Fatalf("attempt %d: key or value can be appended to over its neighbour", i)
		}
	}
	if &w.b[0] != &w.puts[0].Key[0] {
		t.Fatal("the puts are not in the write's one buffer: it moved while they were encoded")
	}
}

package delivery

import (
	"math/rand/v2"
	"net/http"
	"slices"
	"testing"
)

// A signer, kept and reused from attempt to attempt, signs as Signature
// and StandardSignature do afresh, in and out of a rotation's overlap.
func TestSignerSignsAsTheReferenceFunctions(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	secret, previous := "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"
	var pool signers
	for i := 0; i < 50; i++ {
		prev := ""
		if i/10%2 == 1 { // ten in a row each: the pool hands the same signer back
			prev = previous
		}
		body := make([]byte, rng.IntN(300))
		for j := range body {
			body[j] = byte(rng.IntN(256))
		}
		id, ts := "evt_"+string(rune('a'+i%26)), rng.Int64N(1<<40)
		sg := pool.get(secret, prev)
		seedKey := secret
		if prev != "" {
			seedKey = prev
		}
		if got, want := sg.signature(body), Signature(seedKey, body); got != want {
			t.Fatalf("signature %d: %s, want %s", i, got, want)
		}
		want, err := StandardSignature(secret, id, ts, body)
		if err != nil {
			t.Fatal(err)
		}
		if prev != "" {
			old, _ := StandardSignature(prev, id, ts, body)
			want += " " + old
		}
		if got, err := sg.standardSignature(id, ts, body); err != nil || got != want {
			t.Fatalf("webhook-signature %d: %s (%v), want %s", i, got, err, want)
		}
		pool.put(sg)
	}
	sg := pool.get("whsec_not base64!", "")
	if _, err := sg.standardSignature("evt_1", 1, nil); err == nil {
		t.Error("a secret whose key does not decode signed for Standard Webhooks")
	}
}

// Every header setHeaders sets is derived or kept with the attempt, in a
// sentHeaders that holds them all, in and out of Standard Webhooks and a
// rotation's overlap.
func TestSetHeadersKeepsEveryVaryingHeader(t *testing.T) {
	d := Delivery{ID: "dlv_1", WebhookID: "wh_1", EventID: "evt_1", Body: []byte(`{}`)}
	for _, standard := range []bool{false, true} {
		for _, previous := range []string{"", "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"} {
			h := http.Header{}
			var sent sentHeaders
			sg := newSigner("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", previous)
			if err := setHeaders(h, sg, &d, 1, 1, standard, "demosvc/test", &sent); err != nil {
				t.Fatal(err)
			}
			kept := map[string]bool{}
			for i, kv := 0, sent.pairs(); i < len(kv); i += 2 {
				kept[kv[i]] = true
				if h.Get(kv[i]) != kv[i+1] {
					t.Errorf("kept %s: %q, sent %q", kv[i], kv[i+1], h.Get(kv[i]))
				}
			}
			for k := range h {
				if kept[k] == slices.Contains(derived, k) {
					t.Errorf("standard %v, previous %q: %s is kept %v, derived %v", standard, previous, k, kept[k], slices.Contains(derived, k))
				}
			}
		}
	}
}

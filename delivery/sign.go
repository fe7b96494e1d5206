// Package delivery is the outbound side of demosvc: it reads the event log
// from a durable cursor per webhook, and POSTs each matching event, signed,
// to the webhook's URL, with durable retry state.
package delivery

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"hash"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Signature returns the X-Service-Signature value of body: "sha256=" and
// the lowercase hex HMAC-SHA256 of the exact body bytes, keyed with the
// whole secret string as shown at registration (whsec_ included).
func Signature(secret string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// StandardSignature returns the Standard Webhooks webhook-signature value:
// "v1," and the base64 HMAC-SHA256 of "id.timestamp.body", keyed with the
// bytes the base64 after "whsec_" decodes to.
func StandardSignature(secret, id string, timestamp int64, body []byte) (string, error) {
	key, err := standardKey(secret)
	if err != nil {
		return "", err
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + strconv.FormatInt(timestamp, 10) + "."))
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil)), nil
}

func standardKey(secret string) ([]byte, error) {
	return base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
}

// signer computes Signature and StandardSignature for one webhook's
// secrets with MACs keyed once and reset between attempts: keying a MAC
// hashes two blocks and allocates its states, and every attempt signs
// twice (three times during a rotation's overlap). It also holds the
// header block an attempt sends. Each loop keeps its signers in a signers
// pool; a signer is used by one attempt at a time.
type signer struct {
	secret, previous string    // what it is keyed with (projections.Target.Signing)
	seed             hash.Hash // X-Service-Signature's: previous during an overlap, else secret
	std, stdPrevious hash.Hash // webhook-signature's; stdPrevious nil outside an overlap
	stdErr           error     // a secret whose key does not decode
	buf              []byte
	h                http.Header
	vals             []string // h's values, in one array
}

func newSigner(secret, previous string) *signer {
	s := &signer{secret: secret, previous: previous}
	seedKey := secret
	if previous != "" {
		seedKey = previous
	}
	s.seed = hmac.New(sha256.New, []byte(seedKey))
	key, err := standardKey(secret)
	if err == nil && previous != "" {
		var prev []byte
		if prev, err = standardKey(previous); err == nil {
			s.stdPrevious = hmac.New(sha256.New, prev)
		}
	}
	if err != nil {
		s.stdErr = err
		return s
	}
	s.std = hmac.New(sha256.New, key)
	return s
}

// header returns the signer's header block, empty.
func (s *signer) header() http.Header {
	if s.h == nil {
		s.h = make(http.Header, 12) // what setHeaders sets, without growing
	}
	clear(s.h)
	return s.h
}

// signature is Signature(seed key, body).
func (s *signer) signature(body []byte) string {
	s.seed.Reset()
	s.seed.Write(body)
	var sum [sha256.Size]byte
	s.buf = hex.AppendEncode(append(s.buf[:0], "sha256="...), s.seed.Sum(sum[:0]))
	return string(s.buf)
}

// standardSignature is the webhook-signature value: StandardSignature
// with the secret, followed during an overlap by a space and the one with
// the previous secret.
func (s *signer) standardSignature(id string, timestamp int64, body []byte) (string, error) {
	if s.stdErr != nil {
		return "", s.stdErr
	}
	var scratch [64]byte
	signed := strconv.AppendInt(append(append(scratch[:0], id...), '.'), timestamp, 10)
	signed = append(signed, '.')
	s.buf = s.buf[:0]
	for i, mac := range []hash.Hash{s.std, s.stdPrevious} {
		if mac == nil {
			break
		}
		if i > 0 {
			s.buf = append(s.buf, ' ')
		}
		mac.Reset()
		mac.Write(signed)
		mac.Write(body)
		var sum [sha256.Size]byte
		s.buf = base64.StdEncoding.AppendEncode(append(s.buf, "v1,"...), mac.Sum(sum[:0]))
	}
	return string(s.buf), nil
}

// signers is a loop's pool of signers, which a rotation renews one by one.
type signers struct{ pool sync.Pool }

// get returns a signer keyed with secret and previous.
func (p *signers) get(secret, previous string) *signer {
	if s, _ := p.pool.Get().(*signer); s != nil && s.secret == secret && s.previous == previous {
		return s
	}
	return newSigner(secret, previous)
}

func (p *signers) put(s *signer) { p.pool.Put(s) }

// setHeaders sets every header of one attempt and adds to varies those
// that vary from one attempt to the next (all but the derived ones), for
// its attempt detail.
// During a rotation's overlap (sg keyed with a previous secret)
// X-Service-Signature is signed with the previous secret, so a receiver
// that follows the seed keeps verifying until it switches, and
// webhook-signature carries both signatures, the new one first, as
// Standard Webhooks allows.
func setHeaders(h http.Header, sg *signer, d *Delivery, attempt int, now int64, standard bool, userAgent string, varies *sentHeaders) error {
	// Canonical keys set directly, their values in one array: a delivery
	// sends these on every attempt.
	sg.vals = slices.Grow(sg.vals[:0], 9)
	vals := sg.vals
	set := func(k, v string) {
		vals = append(vals, v)
		h[k] = vals[len(vals)-1 : len(vals) : len(vals)]
		if !slices.Contains(derived, k) {
			varies.add(k, v)
		}
	}
	set("Content-Type", "application/json")
	set("User-Agent", userAgent)
	set("X-Service-Signature", sg.signature(d.Body))
	set("X-Service-Event-Id", d.EventID)
	set("X-Service-Webhook-Id", d.WebhookID)
	set("X-Service-Delivery-Attempt", strconv.Itoa(attempt))
	if standard {
		sig, err := sg.standardSignature(d.EventID, now, d.Body)
		if err != nil {
			return err
		}
		set("Webhook-Id", d.EventID)
		set("Webhook-Timestamp", strconv.FormatInt(now, 10))
		set("Webhook-Signature", sig)
	}
	return nil
}

// sentHeaders are the request headers of an attempt that vary from one
// attempt to the next (setHeaders), in the order set: an attempt's
// detail is written without a map built only to be encoded.
type sentHeaders struct {
	n  int
	kv [2 * 5]string
}

func (s *sentHeaders) add(k, v string) {
	s.kv[2*s.n], s.kv[2*s.n+1] = k, v
	s.n++
}

// pairs returns the names and values, each name followed by its value.
func (s *sentHeaders) pairs() []string { return s.kv[:2*s.n] }

// Package delivery is the outbound side of demosvc: it reads the event log
// from a durable cursor per webhook, and POSTs each matching event, signed,
// to the webhook's URL, with durable retry state.
package delivery

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
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
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return "", err
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + strconv.FormatInt(timestamp, 10) + "."))
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil)), nil
}

// setHeaders sets every header of one attempt. During a rotation's
// overlap (previous not "") X-Service-Signature is signed with the
// previous secret, so a receiver that follows the seed keeps verifying
// until it switches, and webhook-signature carries both signatures, the
// new one first, as Standard Webhooks allows.
func setHeaders(h http.Header, secret, previous string, d *Delivery, attempt int, now int64, standard bool, userAgent string) error {
	seedKey := secret
	if previous != "" {
		seedKey = previous
	}
	// Canonical keys set directly, their values in one array: a delivery
	// sends these on every attempt.
	vals := make([]string, 0, 9)
	set := func(k, v string) {
		vals = append(vals, v)
		h[k] = vals[len(vals)-1 : len(vals) : len(vals)]
	}
	set("Content-Type", "application/json")
	set("User-Agent", userAgent)
	set("X-Service-Signature", Signature(seedKey, d.Body))
	set("X-Service-Event-Id", d.EventID)
	set("X-Service-Webhook-Id", d.WebhookID)
	set("X-Service-Delivery-Attempt", strconv.Itoa(attempt))
	if standard {
		sig, err := StandardSignature(secret, d.EventID, now, d.Body)
		if err != nil {
			return err
		}
		if previous != "" {
			old, err := StandardSignature(previous, d.EventID, now, d.Body)
			if err != nil {
				return err
			}
			sig += " " + old
		}
		set("Webhook-Id", d.EventID)
		set("Webhook-Timestamp", strconv.FormatInt(now, 10))
		set("Webhook-Signature", sig)
	}
	return nil
}

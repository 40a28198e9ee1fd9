package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/agentfs/agentfs"
)

// The Standard Webhooks headers of every delivery.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// errSecret says a signing secret is not "whsec_" and base64.
var errSecret = errors.New("webhook secret is not whsec_ followed by base64")

// secretKey is the HMAC key a secret names: the base64 after whsec_.
func secretKey(secret string) ([]byte, error) {
	rest, ok := strings.CutPrefix(secret, agentfs.WebhookSecretPrefix)
	if !ok {
		return nil, errSecret
	}
	key, err := base64.StdEncoding.DecodeString(rest)
	if err != nil || len(key) == 0 {
		return nil, errSecret
	}
	return key, nil
}

// Sign is the webhook-signature of one delivery as Standard Webhooks
// defines it: "v1," and the base64 HMAC-SHA256, keyed with the secret's
// decoded bytes, of "id.timestamp.body" (timestamp in Unix seconds).
func Sign(secret, id string, at time.Time, body []byte) (string, error) {
	key, err := secretKey(secret)
	if err != nil {
		return "", err
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + strconv.FormatInt(at.Unix(), 10) + "."))
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil)), nil
}

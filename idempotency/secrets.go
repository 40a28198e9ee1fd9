package idempotency

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Some answers carry a secret that the caller sees once: a share link's
// url, a delegated token, a webhook's signing secret. A retry after a lost
// answer must still learn it, so the key's record must keep it; but a
// record is kept for days, shown by GET /v1/operations to any token of the
// subject, and lies in every backup of the database. So a recorded answer
// keeps its secret members only sealed:
//
//   - The outcome names them (Outcome.Secrets). Before it is recorded,
//     Withhold replaces each with null in the body and collects their values,
//     which RecordKeys.Seal encrypts (AES-256-GCM) under the server's record
//     key, bound to the subject, the key and the token that made the
//     request (the additional data), so a sealed value moved to another
//     record, or a record's token changed, no longer opens.
//   - /v1/operations shows the recorded body, secrets null, and names them.
//   - A replay to the token that made the record opens them and answers the
//     whole body; to any other token (or when the record key that sealed
//     them is gone) it answers the body with them null, and says so.
//
// The record key never lives in the database: see AGENTFS_RECORD_KEY.

// RecordKeyBytes is the size of a record key (AES-256).
const RecordKeyBytes = 32

// ErrUnsealable says a recorded secret cannot be opened with the record keys
// this server holds: it was sealed under a key since rotated away, or the
// record was altered.
var ErrUnsealable = errors.New("recorded secret cannot be opened with this server's record keys")

// sealedVersion is the first byte of every sealed value: its layout.
const sealedVersion = 1

// keyIDBytes is how much of a key's fingerprint names it in what it sealed.
const keyIDBytes = 8

// RecordKeys seal and open the secret members of recorded answers. The
// first key seals; every key opens what it sealed, so a key can be rotated
// without losing the records sealed under the previous one (keep it listed
// for the idempotency retention).
type RecordKeys struct {
	keys []recordKey
}

type recordKey struct {
	id   [keyIDBytes]byte
	aead cipher.AEAD
}

// NewRecordKeys returns the record keys, each RecordKeyBytes long; the
// first seals.
func NewRecordKeys(keys ...[]byte) (*RecordKeys, error) {
	if len(keys) == 0 {
		return nil, errors.New("record keys: none given")
	}
	out := &RecordKeys{}
	for i, k := range keys {
		if len(k) != RecordKeyBytes {
			return nil, fmt.Errorf("record key %d: %d bytes, want %d", i+1, len(k), RecordKeyBytes)
		}
		block, err := aes.NewCipher(k)
		if err != nil {
			return nil, fmt.Errorf("record key %d: %w", i+1, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("record key %d: %w", i+1, err)
		}
		sum := sha256.Sum256(append([]byte("agentfs record key id\x00"), k...))
		rk := recordKey{aead: aead}
		copy(rk.id[:], sum[:])
		out.keys = append(out.keys, rk)
	}
	return out, nil
}

// ParseRecordKeys reads AGENTFS_RECORD_KEY: one key, or several separated
// by commas (the first seals, the others only open what they sealed before
// a rotation), each RecordKeyBytes random bytes in base64 (standard or URL
// alphabet, padded or not). Errors never repeat the value.
func ParseRecordKeys(s string) (*RecordKeys, error) {
	var keys [][]byte
	for i, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		k, err := decodeKey(part)
		if err != nil {
			return nil, fmt.Errorf("record key %d: %w", i+1, err)
		}
		keys = append(keys, k)
	}
	return NewRecordKeys(keys...)
}

// UnmarshalText reads the keys as ParseRecordKeys does, so that a
// configuration struct can hold them (server.Config, AGENTFS_RECORD_KEY).
func (k *RecordKeys) UnmarshalText(text []byte) error {
	keys, err := ParseRecordKeys(string(text))
	if err != nil {
		return err
	}
	*k = *keys
	return nil
}

func decodeKey(s string) ([]byte, error) {
	if s == "" {
		return nil, errors.New("empty")
	}
	s = strings.TrimRight(s, "=")
	enc := base64.RawStdEncoding
	if strings.ContainsAny(s, "-_") {
		enc = base64.RawURLEncoding
	}
	k, err := enc.DecodeString(s)
	if err != nil {
		return nil, errors.New("not base64")
	}
	if len(k) != RecordKeyBytes {
		return nil, fmt.Errorf("%d bytes, want %d (make one with: head -c 32 /dev/urandom | base64)", len(k), RecordKeyBytes)
	}
	return k, nil
}

// Seal encrypts plaintext under the first key, bound to aad.
func (k *RecordKeys) Seal(plaintext, aad []byte) ([]byte, error) {
	key := k.keys[0]
	out := make([]byte, 1+keyIDBytes, 1+keyIDBytes+key.aead.NonceSize()+len(plaintext)+key.aead.Overhead())
	out[0] = sealedVersion
	copy(out[1:], key.id[:])
	nonce := make([]byte, key.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("seal recorded secret: %w", err)
	}
	out = append(out, nonce...)
	return key.aead.Seal(out, nonce, plaintext, aad), nil
}

// Open decrypts what Seal sealed with the same aad, under whichever key
// sealed it; anything else is ErrUnsealable.
func (k *RecordKeys) Open(sealed, aad []byte) ([]byte, error) {
	if k == nil || len(sealed) < 1+keyIDBytes || sealed[0] != sealedVersion {
		return nil, ErrUnsealable
	}
	for _, key := range k.keys {
		if !bytes.Equal(sealed[1:1+keyIDBytes], key.id[:]) {
			continue
		}
		rest := sealed[1+keyIDBytes:]
		if len(rest) < key.aead.NonceSize() {
			return nil, ErrUnsealable
		}
		n := key.aead.NonceSize()
		plain, err := key.aead.Open(nil, rest[:n], rest[n:], aad)
		if err != nil {
			return nil, ErrUnsealable
		}
		return plain, nil
	}
	return nil, ErrUnsealable
}

// SealedFor binds a sealed secret to its record: the subject, the
// Idempotency-Key and the token that made it.
func SealedFor(subject, key, token string) []byte {
	return []byte("agentfs recorded secret v1\x00" + subject + "\x00" + key + "\x00" + token)
}

// member is one member of a JSON object, its value as written.
type member struct {
	name  string
	value json.RawMessage
}

// objectMembers splits a JSON object into its members, in order, and what
// follows it (whitespace only).
func objectMembers(body []byte) ([]member, []byte, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, nil, errors.New("not a JSON object")
	}
	var out []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, fmt.Errorf("JSON object: %w", err)
		}
		name, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, nil, fmt.Errorf("JSON object member %q: %w", name, err)
		}
		out = append(out, member{name: name, value: v})
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return nil, nil, errors.New("JSON object not closed")
	}
	rest := body[dec.InputOffset():]
	if len(bytes.TrimSpace(rest)) > 0 {
		return nil, nil, errors.New("data after the JSON object")
	}
	return out, rest, nil
}

func encodeMembers(ms []member, rest []byte) []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range ms {
		if i > 0 {
			b.WriteByte(',')
		}
		name, _ := json.Marshal(m.name)
		b.Write(name)
		b.WriteByte(':')
		b.Write(m.value)
	}
	b.WriteByte('}')
	b.Write(rest)
	return b.Bytes()
}

// Withhold returns body, a JSON object, with the value of each named
// member replaced by null, and those values as a JSON object of their own
// (what is sealed). Every name must be a member, and only once.
func Withhold(body []byte, names []string) (redacted, withheld []byte, err error) {
	ms, rest, err := objectMembers(body)
	if err != nil {
		return nil, nil, fmt.Errorf("withhold secrets: %w", err)
	}
	values := map[string]json.RawMessage{}
	for _, n := range names {
		values[n] = nil
	}
	for i, m := range ms {
		v, secret := values[m.name]
		switch {
		case !secret:
			continue
		case v != nil:
			return nil, nil, fmt.Errorf("withhold secrets: member %q appears twice", m.name)
		}
		values[m.name] = m.value
		ms[i].value = json.RawMessage("null")
	}
	for n, v := range values {
		if v == nil {
			return nil, nil, fmt.Errorf("withhold secrets: no member %q", n)
		}
	}
	withheld, err = json.Marshal(values)
	if err != nil {
		return nil, nil, fmt.Errorf("withhold secrets: %w", err)
	}
	return encodeMembers(ms, rest), withheld, nil
}

// Reveal puts the members Withhold took out back into the redacted body.
func Reveal(redacted, withheld []byte) ([]byte, error) {
	ms, rest, err := objectMembers(redacted)
	if err != nil {
		return nil, fmt.Errorf("reveal secrets: %w", err)
	}
	var values map[string]json.RawMessage
	if err := json.Unmarshal(withheld, &values); err != nil {
		return nil, fmt.Errorf("reveal secrets: %w", err)
	}
	for i, m := range ms {
		if v, ok := values[m.name]; ok {
			ms[i].value = v
		}
	}
	return encodeMembers(ms, rest), nil
}

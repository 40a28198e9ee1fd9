package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"net/url"
	"strconv"
)

// putPartDigest is PUT /v1/uploads/{id}/parts/{n} of part, with its
// Content-Digest (RFC 9530) as the Go client sends it (client.UploadFile):
// the client hashes the part as it sends it, and the server passes the
// digest to S3, which checks the bytes, instead of hashing the part a
// second time (DESIGN §7). The hashing is the client's, so it is timed.
func (a *api) putPartDigest(ctx context.Context, id string, n int, part []byte) error {
	sum := sha256.Sum256(part)
	hdr := http.Header{
		"Content-Type":   {"application/octet-stream"},
		"Content-Digest": {"sha-256=:" + base64.StdEncoding.EncodeToString(sum[:]) + ":"},
	}
	path := "/v1/uploads/" + url.PathEscape(id) + "/parts/" + strconv.Itoa(n)
	_, err := a.call(ctx, http.MethodPut, path, bytes.NewReader(part), int64(len(part)), hdr, nil, http.StatusOK, http.StatusCreated)
	return err
}

package client

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
)

// decodeJSON decodes a successful response's body into v and closes it.
func decodeJSON(res *http.Response, v any) error {
	defer res.Body.Close()
	if err := json.NewDecoder(res.Body).Decode(v); err != nil {
		return fmt.Errorf("decode %d response: %w", res.StatusCode, err)
	}
	return nil
}

// withJSON sets v, encoded, as the request's body: a byte slice, so every
// attempt sends it whole.
func (r *request) withJSON(v any) (*request, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode %s body: %w", r.Route, err)
	}
	r.body = newBody(bytes.NewReader(b), nil)
	r.header.Set("Content-Type", "application/json")
	return r, nil
}

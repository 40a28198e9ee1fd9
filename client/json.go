package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
)

// callJSON sends r and decodes its successful answer as a T: the one way
// every method that answers a JSON object reads it.
func callJSON[T any](ctx context.Context, c *Client, r *request) (*T, error) {
	var v T
	if err := c.jsonCall(ctx, r, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// jsonCall sends r and decodes its successful answer into v.
func (c *Client) jsonCall(ctx context.Context, r *request, v any) error {
	res, err := c.do(ctx, r)
	if err != nil {
		return err
	}
	return decodeJSON(res, v)
}

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

package client

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// decodeJSON decodes a successful response's body into v and closes it.
func decodeJSON(res *http.Response, v any) error {
	defer res.Body.Close()
	if err := json.NewDecoder(res.Body).Decode(v); err != nil {
		return fmt.Errorf("agentfs: decode %d response: %w", res.StatusCode, err)
	}
	return nil
}

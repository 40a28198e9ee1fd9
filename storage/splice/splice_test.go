package splice

import (
	"net/url"
	"testing"
)

func TestDialAddr(t *testing.T) {
	for raw, want := range map[string]string{
		"http://s3.internal/bucket/key?X-Amz-Signature=x": "s3.internal:80",
		"http://127.0.0.1:9000/bucket/key":                "127.0.0.1:9000",
		"http://[::1]/bucket/key":                         "[::1]:80",
		"http://[::1]:7070/bucket/key":                    "[::1]:7070",
	} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if got := dialAddr(u); got != want {
			t.Errorf("dialAddr(%s) = %s, want %s", raw, got, want)
		}
	}
}

package handlers_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"
)

// TestReadersNeverSeeAMix replaces a file over and over while readers fetch
// it whole, by range and by HEAD: every read is one version entire, and
// its ETag names exactly the bytes it carried.
func TestReadersNeverSeeAMix(t *testing.T) {
	c, _ := setup(t)
	versions := [][]byte{bytes.Repeat([]byte("a"), 1<<20), bytes.Repeat([]byte("b"), 1<<20)}
	f := c.Do("POST", "/v1/files?path=hot.bin", versions[0]).Expect(t, http.StatusCreated).File(t)
	content := "/v1/files/" + f.ID + "/content"
	etags := map[string]byte{}
	for _, v := range versions {
		sum := sha256.Sum256(v)
		etags[`"`+hex.EncodeToString(sum[:])+`"`] = v[0]
	}
	stop := readUntilStopped(3, func(i int) bool {
		var res = c.Do("GET", content, nil)
		if i%3 == 1 {
			res = c.Do("GET", content, nil, "Range", "bytes=1000-500000")
		}
		if i%3 == 2 {
			res = c.Do("HEAD", content, nil)
			if _, ok := etags[res.Header.Get("ETag")]; !ok || res.Header.Get("Content-Length") != "1048576" {
				t.Errorf("HEAD: %v", res.Header)
			}
			return true
		}
		if res.Status != 200 && res.Status != 206 || len(res.Body) == 0 {
			t.Errorf("read: %d", res.Status)
			return false
		}
		want, ok := etags[res.Header.Get("ETag")]
		if !ok || strings.Trim(string(res.Body), string(want)) != "" {
			t.Errorf("a read mixed versions or disagrees with its ETag %s", res.Header.Get("ETag"))
			return false
		}
		return true
	})
	for i := 1; i <= 12; i++ {
		c.Do("POST", "/v1/files?path=hot.bin&if_exists=replace", versions[i%2]).Expect(t, http.StatusOK)
	}
	stop()
}

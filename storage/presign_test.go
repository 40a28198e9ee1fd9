package storage_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/agentfs/agentfs/storage"
)

func TestParsePublicEndpoint(t *testing.T) {
	for _, tc := range []struct {
		in     string
		host   string
		secure bool
		bad    string // a word the error must hold; "" when valid
	}{
		{in: "https://s3.example.com", host: "s3.example.com", secure: true},
		{in: "https://s3.example.com/", host: "s3.example.com", secure: true},
		{in: "http://127.0.0.1:9000", host: "127.0.0.1:9000"},
		{in: "http://[::1]:9000", host: "[::1]:9000"},
		{in: "HTTPS://S3.example.com:443", host: "S3.example.com:443", secure: true},
		{in: "", bad: "http"},
		{in: "s3.example.com", bad: "http"},
		{in: "127.0.0.1:9000", bad: "http"},
		{in: "ftp://s3.example.com", bad: "http"},
		{in: "https://", bad: "host"},
		{in: "https://:9000", bad: "host"},
		{in: "https:s3.example.com", bad: "host"},
		{in: "https://user:pw@s3.example.com", bad: "user"},
		{in: "https://s3.example.com/bucket", bad: "path"},
		{in: "https://s3.example.com//", bad: "path"},
		{in: "https://s3.example.com?x=1", bad: "query"},
		{in: "https://s3.example.com?", bad: "query"},
		{in: "https://s3.example.com#top", bad: "fragment"},
		{in: "https://s3.example.com#", bad: "fragment"},
		{in: "https://s3.example.com:0", bad: "port"},
		{in: "https://s3.example.com:65536", bad: "port"},
		{in: "https://s3.example.com:09000", bad: "port"},
		{in: "https://s3.example.com:", bad: "port"},
		{in: "https://s3.exa mple.com", bad: "URL"},
		{in: "http://%zz", bad: "URL"},
	} {
		got, err := storage.ParsePublicEndpoint(tc.in)
		if tc.bad != "" {
			if err == nil || !strings.Contains(err.Error(), tc.bad) {
				t.Errorf("ParsePublicEndpoint(%q) = %+v, %v; want an error about %s", tc.in, got, err, tc.bad)
			}
			continue
		}
		if err != nil || got.Host != tc.host || got.Secure != tc.secure {
			t.Errorf("ParsePublicEndpoint(%q) = %+v, %v; want host %q secure %v", tc.in, got, err, tc.host, tc.secure)
		}
	}
}

// FuzzParsePublicEndpoint: whatever the variable holds, the parser never
// panics, and what it accepts is an http(s) root whose host a URL can be
// built on again with the same meaning.
func FuzzParsePublicEndpoint(f *testing.F) {
	for _, s := range []string{"https://s3.example.com", "http://127.0.0.1:9000", "http://[::1]:9000/", "https://u@h",
		"https://h/p", "https://h?q", "https://h#f", "https://h:99999", "h:1", "", "http://%41"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		pe, err := storage.ParsePublicEndpoint(s)
		if err != nil {
			if pe != (storage.PublicEndpoint{}) {
				t.Fatalf("%q: an error with a value %+v", s, pe)
			}
			return
		}
		scheme := "http://"
		if pe.Secure {
			scheme = "https://"
		}
		u, err := url.Parse(scheme + pe.Host + "/bucket/key")
		if err != nil || u.Host != pe.Host || u.Path != "/bucket/key" || u.User != nil || u.RawQuery != "" {
			t.Fatalf("%q accepted as %+v, which does not make a URL: %v %+v", s, pe, err, u)
		}
		if pe.Host == "" || strings.ContainsAny(pe.Host, "/?#@ ") {
			t.Fatalf("%q accepted with host %q", s, pe.Host)
		}
	})
}

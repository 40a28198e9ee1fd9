package agentfs

import (
	"net/netip"
	"net/url"
	"strings"
	"testing"
)

func TestCheckWebhookURL(t *testing.T) {
	for _, tc := range []struct {
		raw     string
		private bool
		want    string // "" when refused
	}{
		{"https://example.com/hook", false, "https://example.com/hook"},
		{"HTTPS://Example.COM:8443/a?b=c", false, "https://example.com:8443/a?b=c"},
		{"https://93.184.216.34/hook", false, "https://93.184.216.34/hook"},
		{"https://[2606:2800:220:1:248:1893:25c8:1946]/", false, "https://[2606:2800:220:1:248:1893:25c8:1946]/"},
		{"http://example.com/hook", false, ""},
		{"http://example.com/hook", true, "http://example.com/hook"},
		{"http://127.0.0.1:8080/hook", true, "http://127.0.0.1:8080/hook"},
		{"https://127.0.0.1/hook", false, ""},
		{"https://10.0.0.1/", false, ""},
		{"https://172.16.5.4/", false, ""},
		{"https://192.168.1.1/", false, ""},
		{"https://169.254.169.254/latest/meta-data", false, ""},
		{"https://100.64.0.1/", false, ""},
		{"https://0.0.0.0/", false, ""},
		{"https://[::1]/", false, ""},
		{"https://[::ffff:10.0.0.1]/", false, ""},
		{"https://[fd00::1]/", false, ""},
		{"https://[fe80::1%25eth0]/", false, ""},
		{"https://224.0.0.1/", false, ""},
		{"https://localhost/", false, ""},
		{"https://api.localhost/", false, ""},
		{"https://user:pw@example.com/", false, ""},
		{"https://example.com/#frag", false, ""},
		{"https:///path", false, ""},
		{"https://example.com:0/", false, ""},
		{"https://example.com:123456/", false, ""},
		{"ftp://example.com/", true, ""},
		{"javascript:alert(1)", true, ""},
		{"//example.com/", true, ""},
		{"example.com", true, ""},
		{"https://exa mple.com/", true, ""},
		{"https://example.com/\\x", true, ""},
		{"", true, ""},
		{"https://example.com/" + strings.Repeat("a", MaxWebhookURL), false, ""},
	} {
		got, err := CheckWebhookURL(tc.raw, tc.private)
		if (err == nil) != (tc.want != "") || got != tc.want {
			t.Errorf("CheckWebhookURL(%q, %v) = %q, %v; want %q", tc.raw, tc.private, got, err, tc.want)
		}
	}
}

func TestPublicAddress(t *testing.T) {
	for addr, want := range map[string]bool{
		"8.8.8.8": true, "1.1.1.1": true, "2001:4860:4860::8888": true,
		"127.0.0.1": false, "10.1.1.1": false, "192.168.0.1": false, "172.31.255.255": false, "169.254.1.1": false,
		"100.100.100.100": false, "198.18.0.1": false, "192.0.2.1": false, "240.0.0.1": false, "255.255.255.255": false,
		"::": false, "::1": false, "fe80::1": false, "fc00::1": false, "ff02::1": false, "::ffff:127.0.0.1": false,
		"2001:db8::1": false, "64:ff9b:1::1": false,
	} {
		if got := PublicAddress(netip.MustParseAddr(addr)); got != want {
			t.Errorf("PublicAddress(%s) = %v, want %v", addr, got, want)
		}
	}
}

// FuzzCheckWebhookURL: whatever the input, CheckWebhookURL never panics,
// and what it accepts is an absolute http(s) URL that it accepts again
// unchanged, https unless private receivers are allowed, and, unless
// they are, never a literal address that is not public.
func FuzzCheckWebhookURL(f *testing.F) {
	for _, s := range []string{"https://example.com/hook", "http://127.0.0.1:9/x", "https://[::1]/", "https://10.0.0.1",
		"HTTPS://A.b:443/?q#f", "https://u@h/", "https://%31%30.0.0.1/", "https://0x7f.0.0.1/", "https://2130706433/"} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, raw string, private bool) {
		got, err := CheckWebhookURL(raw, private)
		if err != nil {
			return
		}
		u, perr := url.Parse(got)
		if perr != nil || u.Hostname() == "" || u.User != nil || u.Fragment != "" {
			t.Fatalf("accepted %q as %q, which is not a plain absolute URL", raw, got)
		}
		if u.Scheme != "https" && (!private || u.Scheme != "http") {
			t.Fatalf("accepted %q with scheme %q (private %v)", raw, u.Scheme, private)
		}
		if again, err := CheckWebhookURL(got, private); err != nil || again != got {
			t.Fatalf("%q → %q → %q, %v", raw, got, again, err)
		}
		if addr, err := netip.ParseAddr(u.Hostname()); err == nil && !private && !PublicAddress(addr) {
			t.Fatalf("accepted %q, a non-public address", raw)
		}
	})
}

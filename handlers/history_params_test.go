package handlers

import (
	"errors"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/problem"
)

// codeOf is the problem code of err ("" for nil).
func codeOf(t testing.TB, err error) string {
	t.Helper()
	if err == nil {
		return ""
	}
	var p *problem.Problem
	if !errors.As(err, &p) {
		t.Fatalf("%v is not a problem", err)
	}
	return p.Code
}

// checkNotANumber holds fn's refusal of s, with code, to what
// strconv.ParseInt made of s (perr): 400 is for what is no decimal
// integer at all, and no other code is given.
func checkNotANumber(t *testing.T, fn, s, code string, perr error) {
	t.Helper()
	if code != problem.InvalidRequest {
		t.Fatalf("%s(%q): code %s", fn, s, code)
	}
	if perr == nil || errors.Is(perr, strconv.ErrRange) {
		t.Fatalf("%s(%q) is 400", fn, s)
	}
}

func TestParseVersion(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
		code string
	}{
		{"1", 1, ""},
		{"42", 42, ""},
		{"2147483647", math.MaxInt32, ""},
		{"+3", 3, ""},
		{"007", 7, ""},
		{"0", 0, problem.ValidationFailed},
		{"-1", 0, problem.ValidationFailed},
		{"2147483648", 0, problem.ValidationFailed},
		{"9223372036854775807", 0, problem.ValidationFailed},
		{"9223372036854775808", 0, problem.ValidationFailed},
		{"-99999999999999999999", 0, problem.ValidationFailed},
		{"", 0, problem.InvalidRequest},
		{"one", 0, problem.InvalidRequest},
		{"1.0", 0, problem.InvalidRequest},
		{"1e3", 0, problem.InvalidRequest},
		{"0x10", 0, problem.InvalidRequest},
		{" 1", 0, problem.InvalidRequest},
		{"1 ", 0, problem.InvalidRequest},
		{"１", 0, problem.InvalidRequest},
	} {
		got, err := parseVersion("version", tc.in)
		if code := codeOf(t, err); code != tc.code || got != tc.want {
			t.Errorf("parseVersion(%q) = %d, %q; want %d, %q", tc.in, got, code, tc.want, tc.code)
		}
	}
}

// FuzzParseVersion: a version is returned exactly when the input is a
// decimal integer from 1 to 2^31-1, and every refusal is 400 (not a
// number) or 422 (a number no version has).
func FuzzParseVersion(f *testing.F) {
	for _, s := range []string{"1", "0", "-1", "2147483648", "99999999999999999999", "x", "", "+1", "1_000"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := parseVersion("version", s)
		n, perr := strconv.ParseInt(s, 10, 64)
		switch code := codeOf(t, err); {
		case code == "":
			if perr != nil || int64(got) != n || got < 1 || got > math.MaxInt32 {
				t.Fatalf("parseVersion(%q) accepted %d", s, got)
			}
		case code == problem.ValidationFailed:
			if perr != nil && !errors.Is(perr, strconv.ErrRange) || perr == nil && n >= 1 && n <= math.MaxInt32 {
				t.Fatalf("parseVersion(%q) is 422", s)
			}
		default:
			checkNotANumber(t, "parseVersion", s, code, perr)
		}
	})
}

func TestParseExpiresIn(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		code string
	}{
		{"", 0, ""},
		{"60", time.Minute, ""},
		{"3600", time.Hour, ""},
		{"31536000", 365 * 24 * time.Hour, ""},
		{"59", 0, problem.ValidationFailed},
		{"0", 0, problem.ValidationFailed},
		{"-60", 0, problem.ValidationFailed},
		{"31536001", 0, problem.ValidationFailed},
		{"99999999999999999999", 0, problem.ValidationFailed},
		{"-99999999999999999999", 0, problem.ValidationFailed},
		{"1h", 0, problem.InvalidRequest},
		{"60.0", 0, problem.InvalidRequest},
		{"sixty", 0, problem.InvalidRequest},
		{" 60", 0, problem.InvalidRequest},
	} {
		got, err := parseExpiresIn("expires_in", tc.in, agentfs.MinExpiresIn, agentfs.MaxExpiresIn)
		if code := codeOf(t, err); code != tc.code || got != tc.want {
			t.Errorf("parseExpiresIn(%q) = %v, %q; want %v, %q", tc.in, got, code, tc.want, tc.code)
		}
	}
}

// FuzzParseExpiresIn: an expiry is returned exactly when the input is a
// decimal number of seconds within the bounds (or empty: none).
func FuzzParseExpiresIn(f *testing.F) {
	for _, s := range []string{"", "60", "59", "31536000", "31536001", "1e3", "-0", "9223372036854775807"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := parseExpiresIn("expires_in", s, agentfs.MinExpiresIn, agentfs.MaxExpiresIn)
		n, perr := strconv.ParseInt(s, 10, 64)
		inRange := perr == nil && n >= 60 && n <= 31536000
		switch code := codeOf(t, err); {
		case code == "" && s == "":
			if got != 0 {
				t.Fatalf("empty gave %v", got)
			}
		case code == "":
			if !inRange || got != time.Duration(n)*time.Second {
				t.Fatalf("parseExpiresIn(%q) accepted %v", s, got)
			}
		case code == problem.ValidationFailed:
			if inRange || perr != nil && !errors.Is(perr, strconv.ErrRange) {
				t.Fatalf("parseExpiresIn(%q) is 422", s)
			}
		default:
			checkNotANumber(t, "parseExpiresIn", s, code, perr)
		}
	})
}

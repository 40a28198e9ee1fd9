package main

import (
	"archive/zip"
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"256MiB", 256 << 20, true},
		{"1GiB", 1 << 30, true},
		{"4KiB", 4 << 10, true},
		{"1M", 1 << 20, true},
		{" 64 KiB ", 64 << 10, true},
		{"1000", 1000, true},
		{"12B", 12, true},
		{"0", 0, false},
		{"-1MiB", 0, false},
		{"MiB", 0, false},
		{"1.5GiB", 0, false},
		{"", 0, false},
		{"9999999999999999999", 0, false},
		{"9000000000GiB", 0, false},
	} {
		got, err := parseSize(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseSize(%q) = %d, %v; want %d, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func TestSizeListFlag(t *testing.T) {
	var ns []int64
	f := sizeListFlag{&ns}
	if err := f.Set("1KiB,64KiB"); err != nil {
		t.Fatal(err)
	}
	if len(ns) != 2 || ns[0] != 1<<10 || ns[1] != 64<<10 {
		t.Fatalf("Set: %v", ns)
	}
	if s := f.String(); s != "1KiB,64KiB" {
		t.Errorf("String: %q", s)
	}
	if err := f.Set("1KiB,,2KiB"); err == nil {
		t.Error("an empty size was accepted")
	}
}

func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"256MiB", "1G", "4 KiB", "0", "-5", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := parseSize(s)
		if err == nil && n <= 0 {
			t.Fatalf("parseSize(%q) = %d without an error", s, n)
		}
	})
}

// zipOf writes a zip of n small entries, as archive/zip does for the
// server's run archive.
func zipOf(t testing.TB, n int) []byte {
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	for i := range n {
		e, err := w.CreateHeader(&zip.FileHeader{Name: string(rune('a'+i%26)) + ".txt", Method: zip.Store})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestZipEntries(t *testing.T) {
	for _, n := range []int{0, 1, 16} {
		z := zipOf(t, n)
		got, err := zipEntries(z[max(0, len(z)-64):])
		if err != nil || got != n {
			t.Errorf("%d entries: got %d, %v", n, got, err)
		}
	}
	z := zipOf(t, 3)
	for name, tail := range map[string][]byte{
		"short":     z[len(z)-10:],
		"cut":       z[:len(z)-1],
		"not a zip": bytes.Repeat([]byte{'x'}, 64),
	} {
		if _, err := zipEntries(tail); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func FuzzZipEntries(f *testing.F) {
	f.Add(zipOf(f, 2))
	f.Add([]byte("PK\x05\x06"))
	f.Fuzz(func(t *testing.T, tail []byte) {
		n, err := zipEntries(tail)
		if err == nil && (n < 0 || n >= 0xffff) {
			t.Fatalf("zipEntries: %d entries without an error", n)
		}
	})
}

func TestTailWriterKeepsTheLastBytes(t *testing.T) {
	data := []byte("0123456789abcdefghijklmnopqrstuvwxyz")
	for _, chunk := range []int{1, 3, 7, 50} {
		tw := &tailWriter{keep: 8}
		for i := 0; i < len(data); i += chunk {
			if _, err := tw.Write(data[i:min(i+chunk, len(data))]); err != nil {
				t.Fatal(err)
			}
		}
		if string(tw.buf) != "stuvwxyz" {
			t.Errorf("chunks of %d: kept %q", chunk, tw.buf)
		}
	}
}

func TestPayloadSendsSlicesOfOneBuffer(t *testing.T) {
	p := newPayload(1 << 20)
	if got := p.bytes(10, 100); &got[0] != &p.buf[10] {
		t.Error("bytes copied instead of slicing")
	}
	// Near the end the slice moves back to fit.
	if got := p.bytes(1<<20-10, 100); len(got) != 100 || &got[99] != &p.buf[len(p.buf)-1] {
		t.Error("bytes near the end do not end at the buffer's end")
	}
	// Longer than the buffer: the buffer again and again.
	n, err := io.Copy(io.Discard, p.reader(0, 3<<20+5))
	if err != nil || n != 3<<20+5 {
		t.Errorf("reader over 3 MiB + 5: %d, %v", n, err)
	}
	txt := p.text(0, 4096)
	for _, c := range txt {
		if c < 'a' || c > 'z' {
			t.Fatalf("text has %q", c)
		}
	}
}

func TestMedianAndPercentile(t *testing.T) {
	if m := median([]float64{3, 1, 2}); m != 2 {
		t.Errorf("median of 3: %v", m)
	}
	if m := median([]float64{4, 1, 3, 2}); m != 2 {
		t.Errorf("median of 4 (the lower middle): %v", m)
	}
	ds := []time.Duration{5, 1, 4, 2, 3, 10, 9, 8, 7, 6}
	if p := percentile(ds, 50); p != 5 {
		t.Errorf("p50: %v", p)
	}
	if p := percentile(ds, 90); p != 9 {
		t.Errorf("p90: %v", p)
	}
}

func TestRotateStartsEachRoundWithTheNextSide(t *testing.T) {
	var order []string
	side := func(name string) func() error { return func() error { order = append(order, name); return nil } }
	for round := range 3 {
		if err := rotate(round, side("a"), side("b"), side("c")); err != nil {
			t.Fatal(err)
		}
	}
	if got := strings.Join(order, ""); got != "abcbcacab" {
		t.Errorf("order %q", got)
	}
	boom := errors.New("boom")
	if err := rotate(0, func() error { return boom }, side("x")); !errors.Is(err, boom) {
		t.Errorf("error not returned: %v", err)
	}
}

func TestFlatRowVerdict(t *testing.T) {
	if r := flatRow("x", 2*time.Millisecond, 3*time.Millisecond); r.verdict != "meets" || r.ratio != "1.50×" {
		t.Errorf("1.5×: %+v", r)
	}
	if r := flatRow("x", 2*time.Millisecond, 3100*time.Microsecond); r.verdict != "misses" {
		t.Errorf("1.55×: %+v", r)
	}
}

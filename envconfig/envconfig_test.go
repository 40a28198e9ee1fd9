package envconfig

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// sample has a setting of every kind, and the tags that change the rules.
type sample struct {
	Name    string        `env:"T_NAME" envDefault:"agentfs"`
	TLS     bool          `env:"T_TLS" envDefault:"false"`
	Workers int           `env:"T_WORKERS" envDefault:"2"`
	Conns   int32         `env:"T_CONNS" envDefault:"32" envMax:"10000"`
	Size    int64         `env:"T_SIZE" envDefault:"16777216" envMin:"5242880"`
	Part    uint64        `env:"T_PART" envDefault:"8388608"`
	Rate    float64       `env:"T_RATE" envDefault:"200"`
	Lease   time.Duration `env:"T_LEASE" envDefault:"30s" envMin:"3s"`
	Cache   time.Duration `env:"T_CACHE" envDefault:"10s" envZero:"-1: no cache"`
	Pending int           `env:"T_PENDING" envDefault:"100" envZero:"0: no bound" envMax:"1073741824"`
	Media   int64         `env:"T_MEDIA" envMin:"1024"`
	Secret  *upper        `env:"T_SECRET"`
	Nested  inner
	Skipped int `env:"-"`
	Wired   func()
}

type inner struct {
	Grace time.Duration `env:"T_GRACE" envDefault:"6h"`
}

// upper reads itself: only upper-case letters.
type upper struct{ s string }

func (u *upper) UnmarshalText(b []byte) error {
	if strings.ToUpper(string(b)) != string(b) {
		return errors.New("not upper case")
	}
	u.s = string(b)
	return nil
}

func read(t *testing.T, env map[string]string) (sample, error) {
	t.Helper()
	var s sample
	err := Read(func(k string) string { return env[k] }, &s)
	return s, err
}

func TestReadFillsDefaults(t *testing.T) {
	t.Parallel()
	got, err := read(t, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := sample{Name: "agentfs", Workers: 2, Conns: 32, Size: 16 << 20, Part: 8 << 20, Rate: 200, Lease: 30 * time.Second,
		Cache: 10 * time.Second, Pending: 100, Nested: inner{Grace: 6 * time.Hour}}
	if got.Wired != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

func TestReadTakesValues(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, value string
		check       func(sample) bool
	}{
		{"T_NAME", " other ", func(s sample) bool { return s.Name == "other" }},
		{"T_NAME", "   ", func(s sample) bool { return s.Name == "agentfs" }}, // blank: unset
		{"T_TLS", "true", func(s sample) bool { return s.TLS }},
		{"T_WORKERS", "5000000000", func(s sample) bool { return s.Workers == 5000000000 }},
		{"T_CONNS", "50000", func(s sample) bool { return s.Conns == 10000 }},      // envMax
		{"T_CONNS", "9999999999", func(s sample) bool { return s.Conns == 10000 }}, // past int32 too
		{"T_SIZE", "5242880", func(s sample) bool { return s.Size == 5<<20 }},
		{"T_RATE", "0", func(s sample) bool { return s.Rate == 0 }}, // a float may be 0
		{"T_RATE", "0.5", func(s sample) bool { return s.Rate == 0.5 }},
		{"T_LEASE", "3s", func(s sample) bool { return s.Lease == 3*time.Second }},
		{"T_CACHE", "0", func(s sample) bool { return s.Cache == -1 }}, // envZero: stored as -1
		{"T_PENDING", "0", func(s sample) bool { return s.Pending == 0 }},
		{"T_PENDING", "7", func(s sample) bool { return s.Pending == 7 }},
		{"T_PENDING", "2000000000", func(s sample) bool { return s.Pending == 1<<30 }},
		{"T_MEDIA", "1024", func(s sample) bool { return s.Media == 1024 }},
		{"T_SECRET", "ABC", func(s sample) bool { return s.Secret != nil && s.Secret.s == "ABC" }},
		{"T_GRACE", "1h", func(s sample) bool { return s.Nested.Grace == time.Hour }},
	} {
		got, err := read(t, map[string]string{tc.name: tc.value})
		if err != nil || !tc.check(got) {
			t.Errorf("%s=%q: %+v, %v", tc.name, tc.value, got, err)
		}
	}
	if got, _ := read(t, nil); got.Secret != nil || got.Media != 0 {
		t.Errorf("settings without a default were set: %+v", got)
	}
}

func TestReadRefusesInTheWordsOfTheVariable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, value, want string }{
		{"T_TLS", "yes please", "T_TLS must be true or false"},
		{"T_WORKERS", "many", "T_WORKERS must be a positive whole number"},
		{"T_WORKERS", "0", "T_WORKERS must be a positive whole number"},
		{"T_WORKERS", "-3", "T_WORKERS must be a positive whole number"},
		{"T_WORKERS", "1.5", "T_WORKERS must be a positive whole number"},
		{"T_WORKERS", "99999999999999999999", "T_WORKERS must be a positive whole number"},
		{"T_CONNS", "-1", "T_CONNS must be a positive whole number"},
		{"T_SIZE", "lots", "T_SIZE must be a positive number of bytes"},
		{"T_SIZE", "5242879", "T_SIZE must be at least 5 MiB"},
		{"T_PART", "-3", "T_PART must be a positive number of bytes"},
		{"T_PART", "0", "T_PART must be a positive number of bytes"},
		{"T_RATE", "-1", "T_RATE must be a number ≥ 0 (0 disables it)"},
		{"T_RATE", "fast", "T_RATE must be a number ≥ 0 (0 disables it)"},
		{"T_LEASE", "soon", "T_LEASE must be a positive duration such as 168h"},
		{"T_LEASE", "0s", "T_LEASE must be a positive duration such as 168h"},
		{"T_LEASE", "1s", "T_LEASE must be at least 3s"},
		{"T_CACHE", "-1s", "T_CACHE must be a positive duration such as 168h (or 0: no cache)"},
		{"T_CACHE", "0s", "T_CACHE must be a positive duration such as 168h (or 0: no cache)"}, // only "0" is 0
		{"T_PENDING", "-1", "T_PENDING must be a positive whole number (or 0: no bound)"},
		{"T_MEDIA", "1023", "T_MEDIA must be at least 1024"},
		{"T_MEDIA", "0", "T_MEDIA must be a positive number of bytes"},
		{"T_SECRET", "abc", "T_SECRET: not upper case"},
		{"T_GRACE", "long", "T_GRACE must be a positive duration such as 168h"},
	} {
		_, err := read(t, map[string]string{tc.name: tc.value})
		var problems Problems
		if !errors.As(err, &problems) || len(problems) != 1 || problems[0] != tc.want {
			t.Errorf("%s=%q: %v, want exactly %q", tc.name, tc.value, err, tc.want)
		}
	}
}

// TestReadListsEveryProblem: one Read names every variable it refused, so
// an operator fixes them all at once.
func TestReadListsEveryProblem(t *testing.T) {
	t.Parallel()
	_, err := read(t, map[string]string{"T_WORKERS": "many", "T_SECRET": "abc", "T_LEASE": "1s", "T_TLS": "maybe"})
	want := "T_TLS must be true or false; T_WORKERS must be a positive whole number; T_LEASE must be at least 3s; T_SECRET: not upper case"
	if err == nil || err.Error() != want {
		t.Fatalf("%v, want %q", err, want)
	}
}

func TestNameAndVariables(t *testing.T) {
	t.Parallel()
	var s sample
	for field, want := range map[any]string{&s.Name: "T_NAME", &s.Conns: "T_CONNS", &s.Nested.Grace: "T_GRACE", &s.Secret: "T_SECRET"} {
		if got := Name(&s, field); got != want {
			t.Errorf("Name = %q, want %q", got, want)
		}
	}
	var got []string
	for _, v := range Variables(&s) {
		got = append(got, v.Name+"="+v.Default)
	}
	want := []string{"T_NAME=agentfs", "T_TLS=false", "T_WORKERS=2", "T_CONNS=32", "T_SIZE=16777216", "T_PART=8388608",
		"T_RATE=200", "T_LEASE=30s", "T_CACHE=10s", "T_PENDING=100", "T_MEDIA=", "T_SECRET=", "T_GRACE=6h"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Variables = %v, want %v", got, want)
	}
	defer func() {
		if recover() == nil {
			t.Error("Name of a field without a variable did not panic")
		}
	}()
	Name(&s, &s.Skipped)
}

package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentfs/agentfs/envconfig"
	"github.com/agentfs/agentfs/idempotency"
	"github.com/agentfs/agentfs/server"
)

// TestConfigErrorsNameWhatIsExpected checks that a bad value is refused
// with a message in the words of the variable it is: a count is not a
// number of bytes.
func TestConfigErrorsNameWhatIsExpected(t *testing.T) {
	t.Parallel()
	base := map[string]string{"AGENTFS_DATABASE_URL": "postgres://x", "AGENTFS_S3_ENDPOINT": "127.0.0.1:9000"}
	for _, tc := range []struct{ name, value, want string }{
		{"AGENTFS_BATCH_WORKERS", "many", "AGENTFS_BATCH_WORKERS must be a positive whole number"},
		{"AGENTFS_BATCH_ITEM_CONCURRENCY", "0", "AGENTFS_BATCH_ITEM_CONCURRENCY must be a positive whole number"},
		{"AGENTFS_BATCH_MAX_ITEMS", "0", "AGENTFS_BATCH_MAX_ITEMS must be a positive whole number"},
		{"AGENTFS_DB_MAX_CONNS", "-3", "AGENTFS_DB_MAX_CONNS must be a positive whole number"},
		{"AGENTFS_RATE_BURST", "1.5", "AGENTFS_RATE_BURST must be a positive whole number"},
		{"AGENTFS_AUTH_FAILURE_LIMIT", "-1", "AGENTFS_AUTH_FAILURE_LIMIT must be a number ≥ 0"},
		{"AGENTFS_AUTH_FAILURE_BURST", "0", "AGENTFS_AUTH_FAILURE_BURST must be a positive whole number"},
		{"AGENTFS_MAX_UPLOAD_BYTES", "lots", "AGENTFS_MAX_UPLOAD_BYTES must be a positive number of bytes"},
		{"AGENTFS_UPLOAD_TTL", "tomorrow", "AGENTFS_UPLOAD_TTL must be a positive duration"},
		{"AGENTFS_MAX_PENDING_UPLOADS", "-1", "AGENTFS_MAX_PENDING_UPLOADS must be a positive whole number (or 0: no bound)"},
		{"AGENTFS_UPLOAD_COMPLETE_LEASE", "soon", "AGENTFS_UPLOAD_COMPLETE_LEASE must be a positive duration"},
		{"AGENTFS_UPLOAD_COMPLETE_LEASE", "1s", "AGENTFS_UPLOAD_COMPLETE_LEASE must be at least 3s"},
		{"AGENTFS_TOKEN_CACHE_TTL", "-1s", "AGENTFS_TOKEN_CACHE_TTL must be a positive duration"},
		{"AGENTFS_UPLOAD_HASH_WINDOW", "big", "AGENTFS_UPLOAD_HASH_WINDOW must be a positive number of bytes"},
		{"AGENTFS_FAULT_MID_COMPLETE", "crash", "AGENTFS_FAULT_MID_COMPLETE must be empty or exit"},
		{"AGENTFS_WRITE_IDLE_TIMEOUT", "never", "AGENTFS_WRITE_IDLE_TIMEOUT must be a positive duration"},
		{"AGENTFS_WRITE_IDLE_TIMEOUT", "30s", "AGENTFS_WRITE_IDLE_TIMEOUT must be longer than AGENTFS_S3_TIMEOUT"},
		{"AGENTFS_MAX_WAITERS_PER_SUBJECT", "-1", "AGENTFS_MAX_WAITERS_PER_SUBJECT must be a positive whole number"},
	} {
		env := map[string]string{tc.name: tc.value}
		for k, v := range base {
			env[k] = v
		}
		_, err := loadConfig(func(k string) string { return env[k] })
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s=%s: %v, want %q", tc.name, tc.value, err, tc.want)
		}
	}
}

// TestServeNeedsARecordKey: agentfs serve refuses to start without
// AGENTFS_RECORD_KEY, or with one that is not 32 bytes of base64, saying
// how to make one and never repeating the value; the other commands that
// read the configuration do not need it.
func TestServeNeedsARecordKey(t *testing.T) {
	t.Parallel()
	base := map[string]string{"AGENTFS_DATABASE_URL": "postgres://x", "AGENTFS_S3_ENDPOINT": "127.0.0.1:9000"}
	getenv := func(extra map[string]string) func(string) string {
		return func(k string) string {
			if v, ok := extra[k]; ok {
				return v
			}
			return base[k]
		}
	}
	if _, err := loadConfig(getenv(nil)); err != nil {
		t.Fatalf("the configuration without a record key: %v", err)
	}
	for value, want := range map[string]string{
		"":                      "AGENTFS_RECORD_KEY is required",
		"   ":                   "head -c 32 /dev/urandom | base64",
		"c2hvcnQta2V5":          "AGENTFS_RECORD_KEY: record key 1: 9 bytes, want 32",
		"correct horse battery": "AGENTFS_RECORD_KEY: record key 1: not base64",
		testRecordKey + ",":     "AGENTFS_RECORD_KEY: record key 2: empty",
	} {
		_, err := recordKeys(getenv(map[string]string{"AGENTFS_RECORD_KEY": value}))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("AGENTFS_RECORD_KEY=%q: %v, want %q", value, err, want)
		}
		if err != nil && len(strings.TrimSpace(value)) > 4 && strings.Contains(err.Error(), strings.TrimSpace(value)) {
			t.Errorf("the error repeats the key: %v", err)
		}
		var stderr strings.Builder
		if err := serve(context.Background(), getenv(map[string]string{"AGENTFS_RECORD_KEY": value}), &stderr); err == nil ||
			!strings.Contains(err.Error(), "AGENTFS_RECORD_KEY") {
			t.Errorf("serve with AGENTFS_RECORD_KEY=%q: %v", value, err)
		}
	}
	for _, value := range []string{testRecordKey, testRecordKey + "," + testRecordKey, " " + testRecordKey + " "} {
		if _, err := recordKeys(getenv(map[string]string{"AGENTFS_RECORD_KEY": value})); err != nil {
			t.Errorf("AGENTFS_RECORD_KEY=%q: %v", value, err)
		}
	}
}

// recordKeys reads AGENTFS_RECORD_KEY as serve does: server.Load parses
// it, and server.New refuses to start without it (at once, before it
// connects to anything).
func recordKeys(getenv func(string) string) (*idempotency.RecordKeys, error) {
	cfg, err := server.Load(getenv)
	if err == nil && cfg.RecordKeys == nil {
		_, err = server.New(context.Background(), cfg)
	}
	return cfg.RecordKeys, err
}

func TestMaxPendingUploadsDefaultsToABound(t *testing.T) {
	t.Parallel()
	env := map[string]string{"AGENTFS_DATABASE_URL": "postgres://x", "AGENTFS_S3_ENDPOINT": "127.0.0.1:9000"}
	for value, want := range map[string]int{"": 100, "0": 0, "7": 7} {
		env["AGENTFS_MAX_PENDING_UPLOADS"] = value
		c, err := loadConfig(func(k string) string { return env[k] })
		if err != nil || c.Limits.MaxPendingUploads != want {
			t.Errorf("AGENTFS_MAX_PENDING_UPLOADS=%q: %d %v, want %d", value, c.Limits.MaxPendingUploads, err, want)
		}
	}
}

// TestEveryVariableIsDocumented: each AGENTFS_* variable the binary reads
// is in docs/operating.md (the server's) or docs/clients.md (the client
// verbs'), so the documentation cannot fall behind the code. The server's
// variables (and agentfs mcp's) are the env tags of its config structs;
// the client verbs read theirs by name in this package.
func TestEveryVariableIsDocumented(t *testing.T) {
	var docs strings.Builder
	for _, name := range []string{"../../docs/operating.md", "../../docs/clients.md"} {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		docs.Write(b)
	}
	readBy := map[string]string{} // variable → what reads it
	for _, v := range envconfig.Variables(&server.Config{}) {
		readBy[v.Name] = "server.Config"
	}
	for _, v := range envconfig.Variables(&mcpConfig{}) {
		readBy[v.Name] = "agentfs mcp"
	}
	tagged := len(readBy)
	sources, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	variable := regexp.MustCompile(`"(AGENTFS_[A-Z0-9_]*[A-Z0-9])"`)
	named := 0
	for _, name := range sources {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range variable.FindAllStringSubmatch(string(b), -1) {
			named++
			if readBy[m[1]] == "" {
				readBy[m[1]] = name
			}
		}
	}
	for name, where := range readBy {
		if !regexp.MustCompile("`" + name + "[`=]").MatchString(docs.String()) {
			t.Errorf("%s reads %s, which neither docs/operating.md nor docs/clients.md names", where, name)
		}
	}
	if tagged < 40 || named < 5 {
		t.Fatalf("found only %d variables in env tags and %d named in the sources: "+
			"the test no longer finds how they are read", tagged, named)
	}
	t.Logf("%d variables: %d from env tags, %d more named in the sources", len(readBy), tagged, len(readBy)-tagged)
}

// TestDocumentedDefaultsAreTheDefaults: the row of docs/operating.md's
// table that names a variable gives the default its env tag has, so the
// table cannot fall behind a changed default either.
func TestDocumentedDefaultsAreTheDefaults(t *testing.T) {
	b, err := os.ReadFile("../../docs/operating.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{} // variable → its table row
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "| `AGENTFS_") {
			continue
		}
		names, _, _ := strings.Cut(line[1:], "|")
		for _, m := range regexp.MustCompile("`(AGENTFS_[A-Z0-9_]+)`").FindAllStringSubmatch(names, -1) {
			rows[m[1]] = line
		}
	}
	checked := 0
	for _, v := range append(envconfig.Variables(&server.Config{}), envconfig.Variables(&mcpConfig{})...) {
		if v.Default == "" {
			continue
		}
		checked++
		row, ok := rows[v.Name]
		if !ok {
			t.Errorf("%s (default %s) has no row in docs/operating.md's table", v.Name, v.Default)
		} else if !strings.Contains(row, "`"+v.Default+"`") {
			t.Errorf("docs/operating.md gives %s another default than %s:\n%s", v.Name, v.Default, row)
		}
	}
	if checked < 40 {
		t.Fatalf("only %d variables have a default in their env tag", checked)
	}
}

// TestPublicEndpointIsCheckedAtStart: a bad AGENTFS_S3_PUBLIC_ENDPOINT or
// AGENTFS_S3_PRESIGN_TTL is refused when the configuration is read,
// naming the variable; a good one is taken as given.
func TestPublicEndpointIsCheckedAtStart(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		endpoint, ttl, bad string
		want               time.Duration
	}{
		{endpoint: "", want: 5 * time.Minute},
		{endpoint: "https://s3.example.com", ttl: "90s", want: 90 * time.Second},
		{endpoint: "http://127.0.0.1:9000/", want: 5 * time.Minute},
		{endpoint: "s3.example.com:9000", bad: "AGENTFS_S3_PUBLIC_ENDPOINT"},
		{endpoint: "https://s3.example.com/bucket", bad: "AGENTFS_S3_PUBLIC_ENDPOINT"},
		{endpoint: "https://s3.example.com", ttl: "0s", bad: "AGENTFS_S3_PRESIGN_TTL"},
		{endpoint: "https://s3.example.com", ttl: "500ms", bad: "AGENTFS_S3_PRESIGN_TTL"},
		{endpoint: "https://s3.example.com", ttl: "200h", bad: "AGENTFS_S3_PRESIGN_TTL"},
	} {
		env := map[string]string{"AGENTFS_DATABASE_URL": "postgres://x", "AGENTFS_S3_ENDPOINT": "127.0.0.1:9000",
			"AGENTFS_S3_PUBLIC_ENDPOINT": tc.endpoint, "AGENTFS_S3_PRESIGN_TTL": tc.ttl}
		c, err := loadConfig(func(k string) string { return env[k] })
		if tc.bad != "" {
			if err == nil || !strings.Contains(err.Error(), tc.bad) {
				t.Errorf("%q, ttl %q: %v, want an error naming %s", tc.endpoint, tc.ttl, err, tc.bad)
			}
			continue
		}
		if err != nil || c.Storage.S3PublicEndpoint != tc.endpoint || c.Storage.PresignTTL != tc.want {
			t.Errorf("%q, ttl %q: %q %s %v", tc.endpoint, tc.ttl, c.Storage.S3PublicEndpoint, c.Storage.PresignTTL, err)
		}
	}
}

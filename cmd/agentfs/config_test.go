package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
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
		{"AGENTFS_MAX_UPLOAD_BYTES", "lots", "AGENTFS_MAX_UPLOAD_BYTES must be a positive number of bytes"},
		{"AGENTFS_UPLOAD_TTL", "tomorrow", "AGENTFS_UPLOAD_TTL must be a positive duration"},
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

// TestEveryVariableIsDocumented: each AGENTFS_* variable the binary reads
// is in docs/operating.md (the server's) or docs/clients.md (the client
// verbs'), so the documentation cannot fall behind the code.
func TestEveryVariableIsDocumented(t *testing.T) {
	var docs strings.Builder
	for _, name := range []string{"../../docs/operating.md", "../../docs/clients.md"} {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		docs.Write(b)
	}
	sources, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	variable := regexp.MustCompile(`"(AGENTFS_[A-Z0-9_]*[A-Z0-9])"`)
	seen := 0
	for _, name := range sources {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range variable.FindAllStringSubmatch(string(b), -1) {
			seen++
			if !regexp.MustCompile("`" + m[1] + "[`=]").MatchString(docs.String()) {
				t.Errorf("%s reads %s, which neither docs/operating.md nor docs/clients.md names", name, m[1])
			}
		}
	}
	if seen < 30 {
		t.Fatalf("found only %d variables in the sources: the pattern no longer matches how they are read", seen)
	}
}

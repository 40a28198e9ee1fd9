package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentfs/agentfs/handlers/apitest"
)

// TestHealthcheck probes a real server the ways a container and a person
// would, and fails clearly without one.
func TestHealthcheck(t *testing.T) {
	t.Parallel()
	srv := apitest.NewServer(t, apitest.Options{})
	port := srv.URL[strings.LastIndex(srv.URL, ":")+1:]
	for _, tc := range []struct {
		name string
		env  cliEnv
		args []string
		want string
	}{
		{"URLFlag", cliEnv{}, []string{"--url", srv.URL}, srv.URL + "/readyz: 200 OK"},
		{"AgentfsURL", cliEnv{"AGENTFS_URL": srv.URL + "/"}, nil, srv.URL + "/readyz: 200 OK"},
		{"Live", cliEnv{"AGENTFS_URL": srv.URL}, []string{"--live"}, srv.URL + "/healthz: 200 OK"},
		{"WildcardListenAddr", cliEnv{"AGENTFS_LISTEN_ADDR": "0.0.0.0:" + port}, nil, "http://127.0.0.1:" + port + "/readyz: 200 OK"},
	} {
		stdout, stderr, err := tc.env.run(append([]string{"healthcheck"}, tc.args...)...)
		if err != nil || !strings.Contains(stdout, tc.want) {
			t.Errorf("%s: %v, stdout %q, stderr %q; want %q", tc.name, err, stdout, stderr, tc.want)
		}
	}

	down := "http://" + freeAddr(t)
	_, _, err := cliEnv{"AGENTFS_URL": down}.run("healthcheck")
	if err == nil || exitCode(err) != 1 || !strings.Contains(err.Error(), down+"/readyz: connection refused") {
		t.Errorf("healthcheck without a server: %v (exit %d)", err, exitCode(err))
	}
	unready := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"code":"STORAGE_UNAVAILABLE"}`))
	}))
	defer unready.Close()
	_, _, err = cliEnv{}.run("healthcheck", "--url", unready.URL)
	if err == nil || exitCode(err) != 1 || !strings.Contains(err.Error(), "503") || !strings.Contains(err.Error(), "STORAGE_UNAVAILABLE") {
		t.Errorf("healthcheck of an unready server: %v", err)
	}
}

func TestHealthBase(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{nil, "http://127.0.0.1:8080"},
		{map[string]string{"AGENTFS_LISTEN_ADDR": "0.0.0.0:9090"}, "http://127.0.0.1:9090"},
		{map[string]string{"AGENTFS_LISTEN_ADDR": ":9090"}, "http://127.0.0.1:9090"},
		{map[string]string{"AGENTFS_LISTEN_ADDR": "[::]:9090"}, "http://[::1]:9090"},
		{map[string]string{"AGENTFS_LISTEN_ADDR": "10.0.0.5:80"}, "http://10.0.0.5:80"},
		{map[string]string{"AGENTFS_LISTEN_ADDR": "0.0.0.0:9090", "AGENTFS_URL": "https://files.example.com"}, "https://files.example.com"},
	} {
		if got := healthBase(func(k string) string { return tc.env[k] }); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.env, got, tc.want)
		}
	}
}

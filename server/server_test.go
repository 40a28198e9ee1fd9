package server_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentfs/agentfs/handlers"
	"github.com/agentfs/agentfs/handlers/apitest"
	"github.com/agentfs/agentfs/server"
	"github.com/agentfs/agentfs/storage/storagetest"
)

// TestTheToolDoorIsWired: a server from New serves /mcp with the tools on
// its own core, behind its authentication, each call counted in /metrics,
// so the harness's handler tests reach /mcp as serve does.
func TestTheToolDoorIsWired(t *testing.T) {
	t.Parallel()
	srv := apitest.NewServer(t, apitest.Options{})
	token := srv.Token(t, "agent")
	cs := apitest.MCPSession(t, srv.URL, token)
	apitest.CallTool(t, cs, "write_file", map[string]any{"path": "door/hello.txt", "content": "hello"})
	c := apitest.NewClient(t, srv.URL, token)
	var list apitest.FileList
	c.Do("GET", "/v1/files?prefix=door/", nil).Expect(t, http.StatusOK).JSON(t, &list)
	if len(list.Data) != 1 || list.Data[0].Path != "door/hello.txt" {
		t.Fatalf("the tool's write is not a file of the API: %+v", list.Data)
	}
	metrics := string(apitest.NewClient(t, srv.URL, "").Do("GET", "/metrics", nil).Expect(t, http.StatusOK).Body)
	if !strings.Contains(metrics, `agentfs_mcp_tool_calls_total{outcome="ok",tool="write_file"} 1`) {
		t.Fatalf("the call is not counted:\n%s", metrics)
	}
	var protocol struct {
		MCP *struct{ Endpoint string } `json:"mcp"`
	}
	c.Do("GET", "/v1/protocol", nil).Expect(t, http.StatusOK).JSON(t, &protocol)
	if protocol.MCP == nil || protocol.MCP.Endpoint != "/mcp" {
		t.Fatalf("/v1/protocol does not announce the door: %+v", protocol.MCP)
	}
}

// TestNewHandsOverSettingsOwnedElsewhere: a setting two parts use is set
// once, on its owner, and New hands it to the other: the store's
// retentions are what the API advertises, and the API's version bound is
// what the sweeper keeps.
func TestNewHandsOverSettingsOwnedElsewhere(t *testing.T) {
	t.Parallel()
	cfg := storagetest.Config(t)
	cfg.EventRetention, cfg.DeletedRetention = 48*time.Hour, 72*time.Hour
	srv := apitest.NewServer(t, apitest.Options{Config: &cfg, Limits: handlers.Limits{MaxVersions: 2}})
	c := srv.Client(t, "alice")
	var protocol struct {
		Limits      map[string]any `json:"limits"`
		Idempotency map[string]any `json:"idempotency"`
	}
	c.Do("GET", "/v1/protocol", nil).Expect(t, http.StatusOK).JSON(t, &protocol)
	for name, want := range map[string]float64{"event_retention_seconds": 48 * 3600, "deleted_retention_seconds": 72 * 3600,
		"max_versions": 2} {
		if protocol.Limits[name] != want {
			t.Errorf("limits.%s = %v, want %v", name, protocol.Limits[name], want)
		}
	}
	if got := protocol.Idempotency["retention_seconds"]; got != float64(7*24*3600) {
		t.Errorf("idempotency.retention_seconds = %v, want the store's", got)
	}
	id := c.Do("POST", "/v1/files?path=kept.txt", "one").Expect(t, http.StatusCreated).File(t).ID
	for _, body := range []string{"two", "three", "four"} {
		c.Do("POST", "/v1/files?path=kept.txt&if_exists=replace", body).Expect(t, http.StatusOK)
	}
	srv.Sweep()
	var versions struct{ Data []struct{ Version int } }
	c.Do("GET", "/v1/files/"+id+"/versions", nil).Expect(t, http.StatusOK).JSON(t, &versions)
	if len(versions.Data) != 2 {
		t.Fatalf("%d versions after a sweep with MaxVersions 2: %+v", len(versions.Data), versions.Data)
	}
}

// TestNewNeedsRecordKeys: without record keys New refuses at once, before
// it connects to anything, naming the variable and how to make a key.
func TestNewNeedsRecordKeys(t *testing.T) {
	t.Parallel()
	_, err := server.New(context.Background(), server.Config{})
	if err == nil || !strings.Contains(err.Error(), "AGENTFS_RECORD_KEY is required") ||
		!strings.Contains(err.Error(), "head -c 32 /dev/urandom | base64") {
		t.Fatalf("New without record keys: %v", err)
	}
}

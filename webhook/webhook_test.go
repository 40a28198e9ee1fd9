package webhook

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentfs/agentfs/envconfig"
)

// TestSignMatchesTheReferenceLibrary: the signature of a fixed delivery is
// the one the Standard Webhooks reference library (npm standardwebhooks
// 1.1.1, Webhook.sign) made for the same secret, id, time and body.
func TestSignMatchesTheReferenceLibrary(t *testing.T) {
	const (
		secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
		id     = "evt_01jd8x2m4k9q7v3t5r6w8y0z1a"
		body   = `{"id":"evt_01jd8x2m4k9q7v3t5r6w8y0z1a","object":"event","type":"file.created"}`
		// node -e 'import("standardwebhooks").then(({Webhook}) => console.log(
		//   new Webhook(secret).sign(id, new Date(1764601200000), body)))'
		want = "v1,fmZC7nMndoChZOaBw2TixSyCWcSD1A6f4r3C9WUxOOI="
	)
	got, err := Sign(secret, id, time.Unix(1764601200, 0), []byte(body))
	if err != nil || got != want {
		t.Fatalf("Sign = %q, %v; the reference library signs %q", got, err, want)
	}
	other, _ := Sign(secret, id, time.Unix(1764601201, 0), []byte(body))
	if other == want {
		t.Fatal("the timestamp is not signed")
	}
	for _, bad := range []string{"", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_", "whsec_!!!"} {
		if _, err := Sign(bad, id, time.Now(), nil); err == nil {
			t.Errorf("Sign accepted the secret %q", bad)
		}
	}
}

// TestDialerRefusesPrivateAddresses: without AllowPrivate, a receiver on
// loopback is refused when the connection is made, whether the URL names
// the address or a name that resolves to it (so DNS rebinding cannot
// reach inside); with it, the receiver is reached. Redirects are answers,
// never followed.
func TestDialerRefusesPrivateAddresses(t *testing.T) {
	hits := 0
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits++
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer rcv.Close()
	port := rcv.URL[strings.LastIndex(rcv.URL, ":"):]
	strict := NewHTTPClient(time.Second, false)
	for _, u := range []string{rcv.URL, "http://localhost" + port, "http://[::ffff:127.0.0.1]" + port} {
		_, err := strict.Post(u, "application/json", nil)
		if !errors.Is(err, ErrRefusedAddress) {
			t.Errorf("%s: %v, want the address refused", u, err)
		}
	}
	if hits != 0 {
		t.Fatalf("the receiver was reached %d times", hits)
	}
	open := NewHTTPClient(time.Second, true)
	res, err := open.Post(rcv.URL+"/redirect", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusFound || hits != 1 {
		t.Fatalf("redirect: %d after %d requests, want 302 after 1 (not followed)", res.StatusCode, hits)
	}
}

// TestPostDescribesFailures: what the delivery log says of an attempt
// without a 2xx.
func TestPostDescribesFailures(t *testing.T) {
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			time.Sleep(500 * time.Millisecond)
		}
		w.WriteHeader(http.StatusTeapot)
	}))
	defer slow.Close()
	d := &Deliverer{http: NewHTTPClient(200*time.Millisecond, true)}
	ctx := context.Background()
	if code, why := d.post(ctx, slow.URL+"/slow", "evt_x", time.Now(), "v1,x", nil); code != 0 || why != "timed out" {
		t.Errorf("slow receiver: %d %q", code, why)
	}
	if code, why := d.post(ctx, slow.URL, "evt_x", time.Now(), "v1,x", nil); code != 418 || why != "HTTP 418" {
		t.Errorf("teapot: %d %q", code, why)
	}
	strict := &Deliverer{http: NewHTTPClient(time.Second, false)}
	if code, why := strict.post(ctx, slow.URL, "evt_x", time.Now(), "v1,x", nil); code != 0 || !strings.Contains(why, "not public") {
		t.Errorf("private receiver: %d %q", code, why)
	}
}

// TestScheduleFromTheEnvironment: AGENTFS_WEBHOOK_RETRY_SCHEDULE is read
// as Go durations, its default spans about a day, and a wrong value is
// refused naming the variable.
func TestScheduleFromTheEnvironment(t *testing.T) {
	var def Config
	if err := envconfig.Read(func(string) string { return "" }, &def); err != nil {
		t.Fatal(err)
	}
	var total time.Duration
	for _, d := range def.Retries {
		total += d
	}
	if total < 24*time.Hour || total > 30*time.Hour || def.Timeout != 10*time.Second || def.AllowPrivate {
		t.Fatalf("defaults: %+v (retries span %s)", def, total)
	}
	var cfg Config
	env := map[string]string{"AGENTFS_WEBHOOK_RETRY_SCHEDULE": "10ms, 2s,1h"}
	if err := envconfig.Read(func(k string) string { return env[k] }, &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Retries.String() != "10ms,2s,1h0m0s" {
		t.Fatalf("schedule %s", cfg.Retries)
	}
	for _, bad := range []string{"soon", "1s,,2s", "-1s", "0s"} {
		env["AGENTFS_WEBHOOK_RETRY_SCHEDULE"] = bad
		err := envconfig.Read(func(k string) string { return env[k] }, &cfg)
		if err == nil || !strings.Contains(err.Error(), "AGENTFS_WEBHOOK_RETRY_SCHEDULE") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

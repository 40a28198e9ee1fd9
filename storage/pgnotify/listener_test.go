package pgnotify

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestNotifierTakesANewListenAtOnce: once the loop listens on one channel
// and waits for a notification, the first subscriber of another channel
// does not wait for that wait to end: the loop is interrupted, LISTENs, and
// the subscriber hears the next notification. The loop's wait is an hour
// here, so a loop that is not interrupted fails the test.
func TestNotifierTakesANewListenAtOnce(t *testing.T) {
	url := os.Getenv("AGENTFS_TEST_DATABASE_URL")
	if url == "" {
		t.Fatal("AGENTFS_TEST_DATABASE_URL is not set: run the tests with make test, which starts Postgres and exports it")
	}
	ctx := context.Background()
	n := New(url)
	n.poll, n.readyWait = time.Hour, time.Minute
	waiting := make(chan struct{}, 1)
	n.onWait = func() {
		select {
		case waiting <- struct{}{}:
		default:
		}
	}
	defer n.Close()
	live := func(channel string) bool {
		n.mu.Lock()
		defer n.mu.Unlock()
		return n.live[channel]
	}

	_, stopA := n.Subscribe("agentfs_test_first")
	defer stopA()
	if !live("agentfs_test_first") {
		t.Fatal("the first channel is not listened on when its subscriber returns")
	}
	// Once the loop has set up its wait, only an interrupt can end that
	// wait before the hour is up.
	<-waiting
	woke, stopB := n.Subscribe("agentfs_test_second")
	defer stopB()
	if !live("agentfs_test_second") {
		t.Fatal("the second subscriber returned before its LISTEN: the loop's wait was not interrupted")
	}

	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "NOTIFY agentfs_test_second, 'hello'"); err != nil {
		t.Fatal(err)
	}
	select {
	case p := <-woke:
		if p != "hello" {
			t.Fatalf("payload %q, want hello", p)
		}
	case <-time.After(time.Minute):
		t.Fatal("the notification never came")
	}
}

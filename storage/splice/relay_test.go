package splice_test

import (
	"bytes"
	"context"
	"io"
	"math/rand"
	"net"
	"net/url"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/agentfs/agentfs/storage/splice"
	"github.com/agentfs/agentfs/storage/storagetest"
)

// TestRelay reads objects of the real S3 test server through the relay,
// without a store: an object is put with S3's own client, and the relay
// reads it by a presigned URL.
func TestRelay(t *testing.T) {
	t.Parallel()

	// A large read spliced to a TCP socket, as the HTTP server's response
	// writer does: the S3 socket's low-water mark (1 MiB, 4 MiB a splice)
	// is set only while enough of the body is still to come, so lengths on
	// either side of where it is dropped arrive whole, without waiting on
	// a mark they cannot reach. S3 is reached through a proxy that never
	// passes on S3's closing the connection (S3 need not close it), so
	// such a wait would last until S3Timeout and fail the read.
	t.Run("LargeReadsSplicedToASocketArriveWhole", func(t *testing.T) {
		t.Parallel()
		data := randomBytes(13<<20+7, 61)
		get := putObject(t, "spliced.bin", data)
		relay := &splice.Relay{Idle: 10 * time.Second} // far more than a chunk takes through the trickle
		for _, span := range [][2]int64{{0, int64(len(data))}, {1, 5<<20 - 1}, {2, 5 << 20}, {3, 5<<20 + 1}, {4, 9<<20 + 1}} {
			got := spliceToSocket(t, relay, get, span[0], span[1])
			if !bytes.Equal(got, data[span[0]:span[0]+span[1]]) {
				t.Fatalf("%d bytes from %d: got %d bytes that differ", span[1], span[0], len(got))
			}
		}
		if n := relay.SlowChunks(); n != 0 {
			t.Fatalf("%d chunks waited out S3Timeout though S3 kept sending and the client kept reading", n)
		}
	})
}

// putObject stores data under key in a fresh bucket of the test S3 server
// and returns a presigned GET of it that goes through keepOpenProxy.
func putObject(t *testing.T, key string, data []byte) *url.URL {
	t.Helper()
	ctx := context.Background()
	cfg := storagetest.Config(t)
	direct := storagetest.S3(t, cfg)
	if err := direct.MakeBucket(ctx, cfg.S3Bucket, minio.MakeBucketOptions{Region: cfg.S3Region}); err != nil {
		t.Fatalf("make bucket: %v", err)
	}
	if _, err := direct.PutObject(ctx, cfg.S3Bucket, key, bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{}); err != nil {
		t.Fatalf("put object: %v", err)
	}
	cfg.S3Endpoint = keepOpenProxy(t, cfg.S3Endpoint)
	get, err := storagetest.S3(t, cfg).PresignedGetObject(ctx, cfg.S3Bucket, key, 5*time.Minute, nil)
	if err != nil {
		t.Fatalf("presign: %v", err)
	}
	return get
}

// randomBytes is n bytes of a fixed seed.
func randomBytes(n int, seed int64) []byte {
	b := make([]byte, n)
	rand.New(rand.NewSource(seed)).Read(b)
	return b
}

// spliceToSocket reads length bytes of the object from offset into one end
// of a loopback TCP connection, as a response writer would, and returns
// what the other end received.
func spliceToSocket(t *testing.T, relay *splice.Relay, get *url.URL, offset, length int64) []byte {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	received := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			received <- nil
			return
		}
		defer c.Close()
		b, _ := io.ReadAll(c)
		received <- b
	}()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b, err := relay.Open(context.Background(), get, offset, length)
	if err != nil {
		t.Fatal(err)
	}
	n, err := b.WriteTo(conn.(*net.TCPConn))
	b.Close()
	conn.Close()
	if err != nil || n != length {
		t.Fatalf("spliced %d of %d bytes: %v", n, length, err)
	}
	return <-received
}

// keepOpenProxy forwards TCP connections to target, but when target closes
// one it leaves the client's side open: a client that waits for more bytes
// than an answer holds then waits for good. It passes target's bytes on a
// little at a time (trickle), so the client keeps catching up with them and
// waiting for more, as it does with a slow S3.
func keepOpenProxy(t *testing.T, target string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			t.Cleanup(func() { in.Close(); out.Close() })
			go func() { _, _ = io.Copy(out, in); out.Close() }()
			go func() { trickle(in, out) }() // target's close is not passed on
		}
	}()
	return ln.Addr().String()
}

// trickle copies src to dst 64 KiB at a time with a pause in between. The
// pause is the point: it makes src a slow sender, so the reader at dst
// finds nothing to read and waits, over and over, which is where a wait
// for bytes that never come would show.
func trickle(dst, src net.Conn) {
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
			time.Sleep(time.Millisecond)
		}
		if err != nil {
			return
		}
	}
}

package storage

import (
	"context"
	"errors"
	"fmt"
	"mime"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/agentfs/agentfs"
)

// ErrNoPublicEndpoint is PresignBlob's answer when Config.S3PublicEndpoint
// is not set: there is no address a client could fetch a blob from.
var ErrNoPublicEndpoint = errors.New("storage: no public S3 endpoint is configured")

// DefaultPresignTTL is how long a presigned blob URL lives when
// Config.PresignTTL is 0.
const DefaultPresignTTL = 5 * time.Minute

// maxPresignTTL is the longest expiry SigV4 allows a presigned URL.
const maxPresignTTL = 7 * 24 * time.Hour

// PublicEndpoint is the S3 service as clients outside reach it: the host
// (and port) a presigned URL names, and whether it is https.
type PublicEndpoint struct {
	Host   string // host or host:port
	Secure bool
}

// ParsePublicEndpoint reads AGENTFS_S3_PUBLIC_ENDPOINT: an absolute http
// or https URL of the S3 service's root, "https://s3.example.com" or
// "http://127.0.0.1:9000", with no user, path, query or fragment (S3
// presigns path-style URLs under the root; an endpoint behind a path
// prefix cannot be signed).
func ParsePublicEndpoint(s string) (PublicEndpoint, error) {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return PublicEndpoint{}, fmt.Errorf("%q is not a URL; want http(s)://host[:port]", s)
	case u.Scheme != "http" && u.Scheme != "https":
		return PublicEndpoint{}, fmt.Errorf("%q: want an http:// or https:// URL", s)
	case u.Opaque != "" || u.Host == "" || u.Hostname() == "":
		return PublicEndpoint{}, fmt.Errorf("%q: want http(s)://host[:port]", s)
	case u.User != nil:
		return PublicEndpoint{}, fmt.Errorf("%q: must not hold a user or password", s)
	case u.Path != "" && u.Path != "/", u.RawPath != "":
		return PublicEndpoint{}, fmt.Errorf("%q: must be the S3 service's root, without a path", s)
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(s, "#"):
		return PublicEndpoint{}, fmt.Errorf("%q: must have no query or fragment", s)
	}
	if p := u.Port(); p != "" {
		if len(p) > 5 || strings.Trim(p, "0123456789") != "" || p[0] == '0' || atoiPort(p) > 65535 {
			return PublicEndpoint{}, fmt.Errorf("%q: port %s is not 1..65535", s, p)
		}
	} else if strings.HasSuffix(u.Host, ":") {
		return PublicEndpoint{}, fmt.Errorf("%q: empty port", s)
	}
	return PublicEndpoint{Host: u.Host, Secure: u.Scheme == "https"}, nil
}

func atoiPort(p string) int {
	n := 0
	for _, c := range p {
		n = n*10 + int(c-'0')
	}
	return n
}

// newPresigner is an S3 client that only signs: it names the public
// endpoint and sends nothing (the region is given, so no bucket location
// is asked for). nil when no public endpoint is configured.
func newPresigner(cfg Config) (*minio.Client, error) {
	if cfg.S3PublicEndpoint == "" {
		return nil, nil
	}
	pe, err := ParsePublicEndpoint(cfg.S3PublicEndpoint)
	if err != nil {
		return nil, fmt.Errorf("storage: AGENTFS_S3_PUBLIC_ENDPOINT %w", err)
	}
	if cfg.PresignTTL > maxPresignTTL {
		return nil, fmt.Errorf("storage: AGENTFS_S3_PRESIGN_TTL must be at most %s", maxPresignTTL)
	}
	c, err := minio.New(pe.Host, &minio.Options{
		Creds:  credentials.NewStaticV4(cfg.S3AccessKey, cfg.S3SecretKey, ""),
		Secure: pe.Secure,
		Region: cfg.S3Region,
	})
	if err != nil {
		return nil, fmt.Errorf("storage: public S3 client: %w", err)
	}
	return c, nil
}

// PresignBlob signs a GET of the blob at key on the public endpoint,
// valid for Config.PresignTTL: whoever holds the URL reads exactly those
// bytes (a blob never changes) until it expires, with the file's name and
// content type in the response headers. It fails with ErrNoPublicEndpoint
// when none is configured. The key must come from a row the caller was
// allowed to read: signing checks nothing.
func (s *Store) PresignBlob(ctx context.Context, key, filePath, contentType string) (*agentfs.BlobLink, error) {
	if s.presigner == nil {
		return nil, ErrNoPublicEndpoint
	}
	q := url.Values{}
	q.Set("response-content-disposition", mime.FormatMediaType("attachment", map[string]string{"filename": path.Base(filePath)}))
	if contentType != "" {
		q.Set("response-content-type", contentType)
	}
	now := time.Now()
	u, err := s.presigner.PresignedGetObject(ctx, s.bucket, key, s.cfg.PresignTTL, q)
	if err != nil {
		return nil, fmt.Errorf("presign blob: %w", err)
	}
	return &agentfs.BlobLink{URL: u.String(), Expires: now.Add(s.cfg.PresignTTL)}, nil
}

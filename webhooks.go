package agentfs

import (
	"errors"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"time"
)

// Webhook is a receiver the subject's matching events are POSTed to, in
// feed order, signed with its secret (DESIGN §23). Cursor is the last
// event the receiver acknowledged with a 2xx: delivery resumes after it,
// whichever instance delivers and however often they crash.
type Webhook struct {
	ID          string
	Subject     string
	URL         string
	Types       []string
	Prefix      string
	RunID       string
	Description string
	Status      string // WebhookActive or WebhookDisabled
	// Reach is the grant prefixes of the token that made it (nil: every
	// path): its receiver never hears of a file outside them.
	Reach []string
	// TokenID made it: a scoped token sees only the webhooks it and its
	// descendants made.
	TokenID string
	Cursor  EventCursor
	// Secret is the signing secret ("whsec_…"), set only in the answer
	// that made or rotated it.
	Secret string
	// Attempts counts the failed attempts at the event after Cursor since
	// FailingSince; NextAttemptAt is when the next one is due.
	Attempts       int
	FailingSince   *time.Time
	NextAttemptAt  *time.Time
	DisabledReason string
	CreatedAt      time.Time
	UpdatedAt      time.Time
}

// Webhook statuses.
const (
	WebhookActive   = "active"
	WebhookDisabled = "disabled"
)

// WebhookSecretPrefix starts every webhook signing secret (Standard
// Webhooks' spelling); the rest is the key in base64.
const WebhookSecretPrefix = "whsec_"

// MaxWebhookDescription bounds a webhook's description, in bytes.
const MaxWebhookDescription = 1024

// MaxWebhookURL bounds a webhook's URL, in bytes.
const MaxWebhookURL = 2048

// NewWebhook is a request to make a webhook (POST /v1/webhooks).
type NewWebhook struct {
	URL         string
	Types       []string
	Prefix      string
	RunID       string
	Description string
}

// WebhookPatch changes a webhook (PATCH /v1/webhooks/{id}); nil members
// stay as they are. Setting Status to active again resumes delivery after
// the cursor, with the failures forgotten.
type WebhookPatch struct {
	URL    *string
	Types  *[]string
	Status *string
}

// WebhookDelivery is one attempt to deliver one event to a webhook, as
// its delivery log shows it.
type WebhookDelivery struct {
	ID            int64
	WebhookID     string
	EventID       string
	EventPosition int64
	Attempt       int
	StatusCode    int    // 0 when no answer came
	Error         string // why the attempt failed ("" for a 2xx)
	Latency       time.Duration
	At            time.Time
}

// Succeeded reports whether the receiver acknowledged the event.
func (d *WebhookDelivery) Succeeded() bool { return d.StatusCode >= 200 && d.StatusCode < 300 }

// WebhookFilter selects a page of a subject's webhooks, oldest first.
type WebhookFilter struct {
	Limit int
	After *Cursor
}

// Errors of webhook URLs.
var (
	ErrWebhookURL       = errors.New("must be an absolute https URL with a host, without user info or fragment")
	ErrWebhookHTTPS     = errors.New("must use https (http only with AGENTFS_WEBHOOK_ALLOW_PRIVATE=true)")
	ErrWebhookAddress   = errors.New("must not name a private, loopback, link-local or otherwise non-public address")
	ErrWebhookURLLength = errors.New("must be at most 2048 bytes")
)

// CheckWebhookURL parses a webhook's URL: absolute, https, a host, no user
// info or fragment, and no literal address that is not public (a name is
// checked again at every connection, after it resolves, so DNS cannot
// bring a receiver inside later). allowPrivate lifts the https and the
// address rules (AGENTFS_WEBHOOK_ALLOW_PRIVATE), for tests and private
// networks. The answer is the URL as it will be called.
func CheckWebhookURL(raw string, allowPrivate bool) (string, error) {
	if len(raw) > MaxWebhookURL {
		return "", ErrWebhookURLLength
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Opaque != "" || u.User != nil || u.Fragment != "" || u.Hostname() == "" ||
		strings.ContainsAny(raw, " \t\r\n\\") {
		return "", ErrWebhookURL
	}
	switch scheme := strings.ToLower(u.Scheme); {
	case scheme == "https":
	case scheme == "http" && allowPrivate:
	case scheme == "http":
		return "", ErrWebhookHTTPS
	default:
		return "", ErrWebhookURL
	}
	if port := u.Port(); port != "" && (len(port) > 5 || port == "0") {
		return "", ErrWebhookURL
	}
	host := strings.ToLower(u.Hostname())
	if !allowPrivate {
		if addr, err := netip.ParseAddr(host); err == nil && !PublicAddress(addr) {
			return "", ErrWebhookAddress
		}
		if host == "localhost" || strings.HasSuffix(host, ".localhost") {
			return "", ErrWebhookAddress
		}
	}
	u.Scheme, u.Host = strings.ToLower(u.Scheme), strings.ToLower(u.Host)
	return u.String(), nil
}

// nonPublic are the ranges a webhook may not reach beyond the ones netip
// names (private, loopback, link-local, multicast, unspecified).
var nonPublic = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),       // "this" network
	netip.MustParsePrefix("100.64.0.0/10"),   // carrier-grade NAT
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
	netip.MustParsePrefix("192.0.2.0/24"),    // documentation
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
	netip.MustParsePrefix("198.51.100.0/24"), // documentation
	netip.MustParsePrefix("203.0.113.0/24"),  // documentation
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved, broadcast
	netip.MustParsePrefix("64:ff9b:1::/48"),  // local-use NAT64
	netip.MustParsePrefix("2001:db8::/32"),   // documentation
	netip.MustParsePrefix("fc00::/7"),        // unique local
	netip.MustParsePrefix("fec0::/10"),       // site-local
}

// PublicAddress reports whether a webhook may connect to addr: not
// private, loopback, link-local, multicast, unspecified, reserved or
// documentation space (an IPv4-mapped IPv6 address is judged as IPv4).
func PublicAddress(addr netip.Addr) bool {
	addr = addr.Unmap()
	if !addr.IsValid() || addr.IsPrivate() || addr.IsLoopback() || addr.IsLinkLocalUnicast() ||
		addr.IsLinkLocalMulticast() || addr.IsInterfaceLocalMulticast() || addr.IsMulticast() || addr.IsUnspecified() {
		return false
	}
	for _, p := range nonPublic {
		if p.Contains(addr) {
			return false
		}
	}
	return true
}

// PublicIP is PublicAddress for a net.IP.
func PublicIP(ip net.IP) bool {
	addr, ok := netip.AddrFromSlice(ip)
	return ok && PublicAddress(addr)
}

// WebhookSecretAAD binds a webhook's sealed secret to the webhook, so a
// sealed value moved to another row no longer opens.
func WebhookSecretAAD(id string) []byte {
	return []byte("agentfs webhook secret v1\x00" + id)
}

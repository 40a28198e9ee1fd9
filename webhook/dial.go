package webhook

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"

	"github.com/agentfs/agentfs"
)

// ErrRefusedAddress says a receiver's name resolved to an address a
// webhook may not reach (agentfs.PublicAddress).
var ErrRefusedAddress = errors.New("the receiver's address is not public")

// refusePrivate is a net.Dialer Control func: it runs after the name is
// resolved, on the very address about to be connected to, so a name that
// resolves to a public address when the webhook is made and to a private
// one later (DNS rebinding) is refused all the same.
func refusePrivate(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: %s", ErrRefusedAddress, address)
	}
	if !agentfs.PublicAddress(ap.Addr()) {
		return fmt.Errorf("%w: %s", ErrRefusedAddress, ap.Addr())
	}
	return nil
}

// NewHTTPClient is the client deliveries are made with: no proxy, no
// redirect followed (a 3xx is the answer), timeout per attempt, and,
// unless allowPrivate, connections only to public addresses, checked at
// connect time.
func NewHTTPClient(timeout time.Duration, allowPrivate bool) *http.Client {
	dialer := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
	if !allowPrivate {
		dialer.Control = refusePrivate
	}
	transport := &http.Transport{
		Proxy:                 nil,
		DialContext:           dialer.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   timeout,
		ResponseHeaderTimeout: timeout,
	}
	return &http.Client{Transport: transport, Timeout: timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

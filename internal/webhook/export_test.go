package webhook

import (
	"context"
	"errors"
	"net"
	"time"

	"gatehouse/internal/outbound"
	"gatehouse/internal/webhook/dispatch"
	"gatehouse/internal/webhook/sender"
)

// Test-only access to the alert counter.

// FailedTotal returns the alert counter's value for eventType.
func FailedTotal(eventType string) float64 { return dispatch.FailedTotal(eventType) }

// UntilNextDue is how long s's dispatch loop would sleep after a claim
// made at claimedAt (the dispatcher is built, not run).
func UntilNextDue(s *Service, claimedAt time.Time) time.Duration { return s.UntilNextDue(claimedAt) }

// ClientConfig is the outbound configuration of s's attempts.
func ClientConfig(s *Service) outbound.Config { return s.send.ClientConfig() }

// AttemptTimeout is the bound of one of s's attempts.
func AttemptTimeout(s *Service) time.Duration { return s.Dispatcher.AttemptTimeout() }

// EndpointsDisabled returns gatehouse_webhook_endpoints_disabled_total.
func EndpointsDisabled() float64 { return dispatch.EndpointsDisabled() }

// Handoffs is how many deliveries s's workers took by hand-off.
func Handoffs(s *Service) int64 { return s.Dispatcher.Handoffs() }

// Announcing is how many open transactions will announce queued work at
// their commit.
func Announcing(s *Service) int { return s.Dispatcher.Announcing() }

// NoDNS makes callback host names fail to resolve without a query leaving
// the machine (/etc/hosts is still read), until the returned func runs.
func NoDNS() (restore func()) {
	sender.Resolver = &net.Resolver{PreferGo: true, Dial: func(context.Context, string, string) (net.Conn, error) {
		return nil, errors.New("no name server in tests")
	}}
	return func() { sender.Resolver = nil }
}

// ValidateBizData validates bizData against eventType's schema as Publish
// does, without publishing.
func ValidateBizData(ctx context.Context, s *Service, eventType string, bizData []byte) error {
	t, err := s.Catalogue.Lookup(ctx, eventType)
	if err != nil {
		return err
	}
	return t.Validate(ctx, bizData)
}

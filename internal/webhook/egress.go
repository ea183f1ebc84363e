package webhook

import (
	"context"
	"fmt"

	"gatehouse/ent"
	"gatehouse/ent/webhookendpoint"
	"gatehouse/internal/errs"
	"gatehouse/internal/webhook/sender"
)

// HeaderNames returns the names of endpoint id's custom headers, in
// order; their values are never shown back. A deleted endpoint has none.
func (s *Service) HeaderNames(ctx context.Context, id int) ([]string, error) {
	ep, err := s.client.WebhookEndpoint.Query().Where(webhookendpoint.ID(id)).
		Select(webhookendpoint.FieldHeaders).Only(ctx)
	if ent.IsNotFound(err) || err == nil && ep.Headers == nil {
		return []string{}, nil
	}
	if err != nil {
		return nil, err
	}
	return s.HeaderNamesOf(ep)
}

// HeaderNamesOf returns the names of ep's custom headers, in order, from
// an endpoint loaded with its sealed headers.
func (s *Service) HeaderNamesOf(ep *ent.WebhookEndpoint) ([]string, error) {
	if ep.Headers == nil {
		return []string{}, nil
	}
	hs, err := sender.OpenHeaders(s.sealer, *ep.Headers)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(hs))
	for i, h := range hs {
		names[i] = h.Name
	}
	return names, nil
}

// applyEgress checks in's retry schedule, custom headers and client
// certificate and sets them on m (the headers and the key sealed).
func (s *Service) applyEgress(in EndpointInput, m *ent.WebhookEndpointMutation) error {
	if err := applySchedule(in, m); err != nil {
		return err
	}
	if in.Headers != nil {
		hs, err := sender.CheckHeaders(*in.Headers)
		if err != nil {
			return err
		}
		sealed, err := sender.SealHeaders(s.sealer, hs)
		switch {
		case err != nil:
			return fmt.Errorf("seal endpoint headers: %w", err)
		case sealed == nil:
			m.ClearHeaders()
		default:
			m.SetHeaders(sealed)
		}
	}
	switch {
	case in.ClearClientCertificate && (in.ClientCertificate != nil || in.ClientKey != nil):
		return errs.Invalid("clientCertificate", "cannot be set and cleared at once")
	case in.ClearClientCertificate:
		m.ClearClientCertificate()
		m.ClearClientKey()
	case in.ClientCertificate == nil && in.ClientKey == nil:
	case in.ClientCertificate == nil:
		return errs.Invalid("clientCertificate", "is required with clientKey (the PEM certificate the key belongs to)")
	case in.ClientKey == nil:
		return errs.Invalid("clientKey", "is required with clientCertificate (its PEM private key)")
	default:
		if _, err := sender.CheckClientCertificate(*in.ClientCertificate, *in.ClientKey, s.opt.Now()); err != nil {
			return err
		}
		sealed, err := s.sealer.Seal([]byte(*in.ClientKey))
		if err != nil {
			return fmt.Errorf("seal endpoint client key: %w", err)
		}
		m.SetClientCertificate(*in.ClientCertificate)
		m.SetClientKey(sealed)
	}
	return nil
}

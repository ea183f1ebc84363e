package graph

import (
	"context"
	"encoding/json"
	"time"

	"github.com/99designs/gqlgen/graphql"

	"gatehouse/internal/errs"
	"gatehouse/internal/partner"
	"gatehouse/internal/webhook"
	"gatehouse/internal/webhook/sender"
)

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// timeOrNil is t, or nil (GraphQL null) for the zero time.
func timeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// updateInput maps UpdatePartnerAppInput to the service's input: absent
// fields stay nil; null clears the clearable ones.
func (r *mutationResolver) updateInput(ctx context.Context, id int, in UpdatePartnerAppInput) (partner.UpdateInput, error) {
	out := partner.UpdateInput{AppName: in.AppName, RateLimit: in.RateLimit}
	if in.AppKey != nil {
		// app_key is what partners sign with and what OAuth calls client_id:
		// it never changes. Its current value is accepted (a client sending
		// the whole app back), anything else is refused.
		app, err := r.Partners.Get(ctx, id)
		if err != nil {
			return out, err
		}
		if *in.AppKey != app.AppKey {
			return out, validationError("appKey", "cannot be changed; create a new app for a new key")
		}
	}
	if in.Status != nil {
		st := partner.Status(*in.Status)
		out.Status = &st
	}
	if v, set := in.ExpireDate.ValueOK(); set {
		if v == nil {
			out.ClearExpireDate = true
		} else {
			out.ExpireDate = v
		}
	}
	if v, set := in.CallbackURL.ValueOK(); set {
		u := deref(v) // null removes the callback, like ""
		out.CallbackURL = &u
	}
	if v, set := in.RedirectURIs.ValueOK(); set {
		uris := append([]string{}, v...)
		out.RedirectURIs = &uris
	}
	if v, set := in.Scopes.ValueOK(); set {
		scopes := append([]string{}, v...)
		out.Scopes = &scopes
	}
	return out, nil
}

// egressInput sets the retry schedule, preset and custom headers of an
// endpoint's input from the GraphQL arguments: a retrySchedule given as
// null is the default schedule (the preset DEFAULT); headers must be a
// JSON object of strings.
func egressInput(in *webhook.EndpointInput, schedule graphql.Omittable[[]int], preset *WebhookRetryPreset, headers json.RawMessage) error {
	if waits, set := schedule.ValueOK(); set {
		if waits == nil {
			if preset != nil {
				return errs.Invalid("retrySchedule", "give retrySchedule or retryPreset, not both")
			}
			p := sender.PresetDefault
			in.RetryPreset = &p
		} else {
			in.RetrySchedule = &waits
		}
	}
	if preset != nil {
		p := sender.RetryPreset(*preset)
		in.RetryPreset = &p
	}
	if headers != nil {
		m, err := sender.ParseHeaders(headers)
		if err != nil {
			return err
		}
		in.Headers = &m
	}
	return nil
}

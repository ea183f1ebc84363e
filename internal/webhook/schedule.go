package webhook

import (
	"context"
	"fmt"

	"gatehouse/ent"
	"gatehouse/ent/webhookdelivery"
	"gatehouse/internal/errs"
	"gatehouse/internal/webhook/dispatch"
	"gatehouse/internal/webhook/sender"
)

// applySchedule checks in's retry schedule or preset and sets it on m.
func applySchedule(in EndpointInput, m *ent.WebhookEndpointMutation) error {
	waits := in.RetrySchedule
	switch {
	case in.RetrySchedule != nil && in.RetryPreset != nil:
		return errs.Invalid("retrySchedule", "give retrySchedule or retryPreset, not both")
	case in.RetryPreset != nil:
		w, err := sender.PresetSchedule(*in.RetryPreset)
		if err != nil {
			return err
		}
		if w == nil {
			m.ClearRetrySchedule() // the default, following the retry base
			return nil
		}
		waits = &w
	case waits == nil:
		return nil
	}
	if err := sender.CheckSchedule(*waits); err != nil {
		return err
	}
	m.SetRetrySchedule(append([]int{}, *waits...)) // [] is a schedule: one attempt
	return nil
}

// retargetWaiting gives the waiting deliveries of endpoint id the maxRetry
// of its new retry schedule waits (nil: the default), so that the log
// shows what the dispatcher does: it follows the endpoint's schedule as
// it is at each attempt.
func retargetWaiting(ctx context.Context, c *ent.Client, id int, waits []int) error {
	err := c.WebhookDelivery.Update().
		Where(webhookdelivery.EndpointID(id), webhookdelivery.StatusIn(dispatch.StatusPending, dispatch.StatusRetrying)).
		SetMaxRetry(sender.MaxRetryOf(waits)).Exec(ctx)
	if err != nil {
		return fmt.Errorf("waiting deliveries of webhook endpoint %d: %w", id, err)
	}
	return nil
}

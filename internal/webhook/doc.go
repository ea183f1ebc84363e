// Package webhook delivers event callbacks to partners. It holds the
// events side of the domain — the catalogue's service methods, an app's
// endpoints, publishing and fan-out (Fanout) — and wires the parts of
// the domain that live in its subpackages:
//
//   - catalogue: the event types and their JSON Schemas;
//   - dispatch: the dispatcher (claim, record, breaker, rate limit,
//     retention, auto-disable, the NOTIFY wake-up);
//   - sender: the HTTP attempt (signing, URL guard, egress, the decision);
//   - receiver: the receiver of `gatehouse webhook listen`.
package webhook

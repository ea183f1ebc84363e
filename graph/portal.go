package graph

import "time"

// PortalLinkPayload is a minted portal link: its URL (holding the
// one-time token, shown only here) and when it stops working.
type PortalLinkPayload struct {
	URL       string
	ExpiresAt time.Time
}

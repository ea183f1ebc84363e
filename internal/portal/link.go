package portal

import (
	"context"
	"fmt"
	"time"

	"gatehouse/ent"
	"gatehouse/ent/portallink"
	"gatehouse/internal/errs"
	"gatehouse/internal/partner"
	"gatehouse/internal/secret"
)

// Link lifetimes: how long a minted link may wait to be opened.
const (
	DefaultLinkTTL = time.Hour
	MaxLinkTTL     = 24 * time.Hour
)

// Why a link is refused. The three are told apart for the admin's log
// (a replay is worth a warning); the partner sees one plain page.
var (
	ErrLinkUnknown  = errs.New(errs.NotFound, "this portal link is not valid")
	ErrLinkUsed     = errs.New(errs.InvalidState, "this portal link was already used")
	ErrLinkExpired  = errs.New(errs.InvalidState, "this portal link has expired")
	ErrAppDisabled  = errs.New(errs.InvalidState, "the partner app is disabled")
	tokenPrefix     = "gpl_"
	tokenRandomSize = 32
)

// Links mints and redeems one-time portal links. Only a hash of each
// token is stored, in the database, so a link works on any replica and
// across restarts, and exactly once.
type Links struct {
	Client   *ent.Client
	Partners *partner.Service
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

func (l *Links) now() time.Time {
	if l.Now != nil {
		return l.Now()
	}
	return time.Now()
}

// Minted is a new link's token (shown once) and when it stops working.
type Minted struct {
	Token     string
	ExpiresAt time.Time
}

// Mint makes a link for app appID, valid for ttl (0: DefaultLinkTTL; at
// most MaxLinkTTL). A disabled app gets none.
func (l *Links) Mint(ctx context.Context, appID int, ttl time.Duration, readOnly bool) (Minted, error) {
	if ttl == 0 {
		ttl = DefaultLinkTTL
	}
	if ttl < time.Second || ttl > MaxLinkTTL {
		return Minted{}, errs.Invalid("ttl", "must be from 1 to %d seconds", int(MaxLinkTTL/time.Second))
	}
	app, err := l.Partners.Get(ctx, appID)
	if err != nil {
		return Minted{}, err
	}
	if !app.Enabled() {
		return Minted{}, ErrAppDisabled
	}
	token := secret.RandomToken(tokenPrefix, tokenRandomSize)
	exp := l.now().Add(ttl).UTC().Truncate(time.Millisecond)
	if err := l.Client.PortalLink.Create().SetTokenHash(secret.HashToken(token)).SetAppID(appID).
		SetReadOnly(readOnly).SetExpiresAt(exp).Exec(ctx); err != nil {
		return Minted{}, fmt.Errorf("portal: mint link: %w", err)
	}
	return Minted{Token: token, ExpiresAt: exp}, nil
}

// Redeemed is what a redeemed link grants.
type Redeemed struct {
	AppID    int
	ReadOnly bool
	// AppName is the app's name, for the page that asks to open it.
	AppName string
}

// Peek tells what token would grant, without spending it: opening a link
// (a GET, which mail scanners and link previews also send) only shows a
// page whose button spends it. The errors are Redeem's.
func (l *Links) Peek(ctx context.Context, token string) (Redeemed, error) {
	row, err := l.Client.PortalLink.Query().Where(portallink.TokenHash(secret.HashToken(token))).Only(ctx)
	if ent.IsNotFound(err) {
		return Redeemed{}, ErrLinkUnknown
	}
	if err != nil {
		return Redeemed{}, fmt.Errorf("portal: read link: %w", err)
	}
	switch {
	case row.UsedAt != nil:
		return Redeemed{AppID: row.AppID}, ErrLinkUsed
	case !row.ExpiresAt.After(l.now()):
		return Redeemed{AppID: row.AppID}, ErrLinkExpired
	}
	return l.granted(ctx, row)
}

// granted is what row grants while its app is enabled.
func (l *Links) granted(ctx context.Context, row *ent.PortalLink) (Redeemed, error) {
	app, err := l.Partners.Get(ctx, row.AppID)
	if err != nil {
		return Redeemed{}, err
	}
	if !app.Enabled() {
		return Redeemed{AppID: row.AppID}, ErrAppDisabled
	}
	return Redeemed{AppID: row.AppID, ReadOnly: row.ReadOnly, AppName: app.AppName}, nil
}

// Redeem spends token: one UPDATE that only matches an unused, unexpired
// link, so of two concurrent redemptions (on any replicas) one wins. A
// link whose app is disabled is spent and refused.
func (l *Links) Redeem(ctx context.Context, token string) (Redeemed, error) {
	h := secret.HashToken(token)
	now := l.now()
	n, err := l.Client.PortalLink.Update().
		Where(portallink.TokenHash(h), portallink.UsedAtIsNil(), portallink.ExpiresAtGT(now)).
		SetUsedAt(now).Save(ctx)
	if err != nil {
		return Redeemed{}, fmt.Errorf("portal: redeem link: %w", err)
	}
	row, err := l.Client.PortalLink.Query().Where(portallink.TokenHash(h)).Only(ctx)
	if ent.IsNotFound(err) {
		return Redeemed{}, ErrLinkUnknown
	}
	if err != nil {
		return Redeemed{}, fmt.Errorf("portal: read link: %w", err)
	}
	if n == 0 {
		if row.UsedAt != nil {
			return Redeemed{AppID: row.AppID}, ErrLinkUsed
		}
		return Redeemed{AppID: row.AppID}, ErrLinkExpired
	}
	return l.granted(ctx, row)
}

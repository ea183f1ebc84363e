package config

import (
	"errors"
	"regexp"
	"time"
	"unicode/utf8"
)

// Portal themes the partner portal (/portal/), so that it can be handed
// to partners as the company's own.
type Portal struct {
	Name string `flag:"portal-name" default:"Partner portal" usage:"the name shown at the top of every partner portal page" doc:"the name shown at the top of every partner portal page and in its titles (the company's, e.g. \"Acme partners\"; 1-80 characters)"`
	// SessionTTL bounds a portal session from the moment its link is opened.
	SessionTTL time.Duration `flag:"portal-session-ttl" default:"8h" usage:"how long a partner portal session lasts after its link is opened" doc:"how long a partner portal session lasts after its one-time link is opened (1s to 24h), whatever the link's own lifetime; it also ends after 30 minutes without a request"`
	Color      string        `flag:"portal-color" usage:"the partner portal's accent colour, #rrggbb" doc:"the partner portal's accent colour as #rrggbb (a stripe under the header); empty: none"`
}

var hexColor = regexp.MustCompile(`^#[0-9a-fA-F]{6}$`)

// ValidColor reports whether s is a colour written #rrggbb.
func ValidColor(s string) bool { return hexColor.MatchString(s) }

// Validate checks the name's length and the colour's form.
func (p *Portal) Validate() error {
	var errs []error
	if n := utf8.RuneCountInString(p.Name); n < 1 || n > 80 {
		errs = append(errs, invalidf(p, &p.Name, "must be 1 to 80 characters"))
	}
	if p.SessionTTL < time.Second || p.SessionTTL > 24*time.Hour {
		errs = append(errs, invalidf(p, &p.SessionTTL, "must be from 1s to 24h"))
	}
	if p.Color != "" && !ValidColor(p.Color) {
		errs = append(errs, invalidf(p, &p.Color, "must be a colour written #rrggbb, e.g. #0b4fa3"))
	}
	return errors.Join(errs...)
}

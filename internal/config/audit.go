package config

import (
	"time"
)

// Audit is how long the admin audit log is kept.
type Audit struct {
	Retention time.Duration `flag:"audit-retention" default:"8760h" usage:"keep admin audit events this long (0: forever)" doc:"keep admin audit events this long (at least 1h; 0 keeps them forever)"`
}

// Validate checks the retention.
func (a *Audit) Validate() error {
	if a.Retention < 0 || a.Retention > 0 && a.Retention < time.Hour {
		return invalidf(a, &a.Retention, "must be at least 1h, or 0 to keep audit events forever")
	}
	return nil
}

package config

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
)

// Log is the process log's level and format.
type Log struct {
	Level  string `flag:"log-level" default:"info" usage:"debug, info, warn or error" doc:"debug, info, warn or error"`
	Format string `flag:"log-format" default:"text" usage:"text or json" doc:"text or json"`
}

// Validate checks the level and format names.
func (l *Log) Validate() error {
	var errs []error
	if _, err := ParseLevel(l.Level); err != nil {
		errs = append(errs, invalidf(l, &l.Level, "%w", err))
	}
	if l.Format != "text" && l.Format != "json" {
		errs = append(errs, invalidf(l, &l.Format, "%q is not text or json", l.Format))
	}
	return errors.Join(errs...)
}

// ParseLevel maps the names of Log.Level to slog levels.
func ParseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug, nil
	case "info", "":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("%q is not debug, info, warn or error", s)
}

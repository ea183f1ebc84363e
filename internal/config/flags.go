package config

import (
	"reflect"
	"time"

	"github.com/urfave/cli/v3"
)

// Flags are the settings as flags, each with its GATEHOUSE_* environment
// variable behind it and its default, grouped by section in --help. They
// belong on the root command: urfave/cli passes them down, so they may be
// given before or after the subcommand.
func Flags() []cli.Flag {
	d := Defaults()
	var out []cli.Flag
	for _, s := range Settings() {
		env, cat := cli.EnvVars(s.Env), s.Section
		var f cli.Flag
		switch v := s.Field(&d).Interface().(type) {
		case string:
			f = &cli.StringFlag{Name: s.Flag, Value: v, Usage: s.Usage, Sources: env, Category: cat}
		case bool:
			f = &cli.BoolFlag{Name: s.Flag, Value: v, Usage: s.Usage, Sources: env, Category: cat}
		case int:
			f = &cli.IntFlag{Name: s.Flag, Value: v, Usage: s.Usage, Sources: env, Category: cat}
		case time.Duration:
			f = &cli.DurationFlag{Name: s.Flag, Value: v, Usage: s.Usage, Sources: env, Category: cat}
		case []string:
			f = &cli.StringSliceFlag{Name: s.Flag, Value: v, Usage: s.Usage, Sources: env, Category: cat, Config: cli.StringConfig{TrimSpace: true}}
		}
		out = append(out, f)
	}
	return out
}

// FromCommand reads the settings from the flags (and their environment
// variables) of cmd, whose root carries Flags, and resolves them.
func FromCommand(cmd *cli.Command) (Config, error) {
	c := read(cmd)
	return c, c.Resolve()
}

// read copies each setting's flag into its field. The flags are Flags, so
// every one is there with the field's type.
func read(cmd *cli.Command) Config {
	var c Config
	for _, s := range Settings() {
		s.Field(&c).Set(reflect.ValueOf(cmd.Value(s.Flag)))
	}
	return c
}

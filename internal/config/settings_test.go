package config

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v3"
)

func TestDefaultsAreTheDeclaredOnes(t *testing.T) {
	d := Defaults()
	for _, c := range []struct {
		got, want any
	}{
		{d.Server.Addr, "127.0.0.1:8080"}, {d.Server.AdminAddr, "127.0.0.1:8081"}, {d.Database.DataDir, "./data"},
		{d.Redis.KeyPrefix, "gatehouse:"}, {d.Webhooks.RetryBase, time.Second}, {d.Audit.Retention, 8760 * time.Hour},
		{d.Webhooks.PerApp, 4}, {d.Webhooks.Retention, 720 * time.Hour}, {d.Demo.Receiver, "127.0.0.1:9099"},
		{d.Server.RequestTimeout, 10 * time.Second}, {d.Auth.JWTTTL, 7_200_000 * time.Millisecond}, {d.Log.Level, "info"},
		{d.Log.Format, "text"}, {d.Server.ShutdownDrainRaw, ""}, {d.Database.MaxConns, 40}, {d.Database.ReadConns, 0}, {d.Database.DirectURL, ""}, {d.Database.URL, ""}, {d.Redis.URL, ""},
		{d.Demo.Enabled, false},
	} {
		if c.got != c.want {
			t.Errorf("default %v, want %v", c.got, c.want)
		}
	}
	if err := d.Validate(); err != nil {
		t.Fatalf("the defaults do not validate: %v", err)
	}
}

// sample is a value of the setting's type other than its default.
func sample(s Setting) (text string, want any) {
	switch s.Type {
	case reflect.TypeFor[bool]():
		return "true", true
	case reflect.TypeFor[int]():
		return "7", 7
	case reflect.TypeFor[time.Duration]():
		return "7s", 7 * time.Second
	case reflect.TypeFor[[]string]():
		return "a, b", []string{"a", "b"}
	}
	return "v-" + s.Flag, "v-" + s.Flag
}

// readSettings runs a root command carrying Flags with the subcommand
// "serve" and returns what the settings read as (unresolved).
func readSettings(t *testing.T, args ...string) Config {
	t.Helper()
	var got Config
	root := &cli.Command{Name: "gatehouse", Flags: Flags(), Commands: []*cli.Command{{
		Name:   "serve",
		Action: func(_ context.Context, cmd *cli.Command) error { got = read(cmd); return nil },
	}}}
	if err := root.Run(context.Background(), append([]string{"gatehouse"}, args...)); err != nil {
		t.Fatal(err)
	}
	return got
}

// Every declared setting is a flag (before or after the subcommand) and an
// environment variable of its type, and lands in its own field.
func TestEverySettingIsAFlagAndAnEnvironmentVariable(t *testing.T) {
	all := Settings()
	if len(all) < 30 {
		t.Fatalf("%d settings declared", len(all))
	}
	var after, before []string
	for _, s := range all {
		text, _ := sample(s)
		after = append(after, "--"+s.Flag+"="+text)
		before = append(before, "--"+s.Flag+"="+text)
	}
	byFlagAfter := readSettings(t, append([]string{"serve"}, after...)...)
	byFlagBefore := readSettings(t, append(before, "serve")...)
	for _, s := range all {
		text, _ := sample(s)
		t.Setenv(s.Env, text)
	}
	byEnv := readSettings(t, "serve")
	for _, s := range all {
		_, want := sample(s)
		for name, c := range map[string]Config{"flag after the subcommand": byFlagAfter, "flag before it": byFlagBefore, "environment": byEnv} {
			if got := s.Field(&c).Interface(); !reflect.DeepEqual(got, want) {
				t.Errorf("%s (%s): %v, want %v", s.Env, name, got, want)
			}
		}
	}
	// A flag wins over its variable; without either, the default holds.
	t.Setenv("GATEHOUSE_ADDR", "127.0.0.1:1")
	c := readSettings(t, "serve", "--addr", "127.0.0.1:2")
	if c.Server.Addr != "127.0.0.1:2" {
		t.Errorf("flag and variable: %q", c.Server.Addr)
	}
}

func TestDeclarationMistakesAreCaught(t *testing.T) {
	type okSection struct {
		A []string `flag:"a" default:"x, y" usage:"u"`
	}
	for _, c := range []struct {
		name string
		typ  reflect.Type
		want string
	}{
		{"no flag", reflect.TypeFor[struct {
			S noFlag `section:"s"`
		}](), "needs the flag and usage tags"},
		{"not a section type", reflect.TypeFor[struct {
			S int `section:"s"`
		}](), "not a struct"},
		{"no Validate", reflect.TypeFor[struct {
			S okSection `section:"s"`
		}](), "no Validate"},
		{"unsupported type", reflect.TypeFor[struct {
			S badType `section:"s"`
		}](), "not a setting type"},
		{"bad default", reflect.TypeFor[struct {
			S badDefault `section:"s"`
		}](), "default"},
		{"twice", reflect.TypeFor[struct {
			S Server `section:"s"`
			T Server `section:"t"`
		}](), "declared twice"},
	} {
		_, err := settingsOf(c.typ)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	list, err := settingsOf(reflect.TypeFor[struct {
		S listSection `section:"s"`
	}]())
	if err != nil || len(list) != 1 || !slices.Equal(list[0].def.Interface().([]string), []string{"x", "y"}) {
		t.Fatalf("list setting: %v %v", list, err)
	}
}

type noFlag struct {
	N int `usage:"u"`
}

func (*noFlag) Validate() error { return nil }

type badType struct {
	F float64 `flag:"f" usage:"u"`
}

func (*badType) Validate() error { return nil }

type badDefault struct {
	D time.Duration `flag:"d" default:"soon" usage:"u"`
}

func (*badDefault) Validate() error { return nil }

type listSection struct {
	A []string `flag:"a" default:"x, y" usage:"u"`
}

func (*listSection) Validate() error { return nil }

// Each problem is reported under its section's name, all at once.
func TestValidatePrefixesTheSection(t *testing.T) {
	c := Defaults()
	c.Server.Addr = "nope"
	c.Log.Format = "xml"
	c.Webhooks.PerApp = 0
	c.Demo.Receiver = "nope"
	err := c.Validate()
	for _, want := range []string{`server: GATEHOUSE_ADDR: "nope" is not host:port`, "log: GATEHOUSE_LOG_FORMAT", "webhooks: GATEHOUSE_WEBHOOK_PER_APP", "demo: GATEHOUSE_DEMO_RECEIVER"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

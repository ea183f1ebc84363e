package config

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Setting is one setting of the service, declared once by the tags of a
// field of a section struct:
//
//	flag    the flag's name; the environment variable is GATEHOUSE_ and
//	        the name in upper case with '_' for '-' (required)
//	default the default, written as on the command line; absent: the zero value
//	usage   one line of `gatehouse --help`, plain text (required)
//	doc     the meaning column of docs/configuration.md (default: usage)
//	empty   with no default: what leaving it empty means, for the docs
//
// doc and empty are plain text (a struct tag cannot hold a backquote;
// markdown links work); the tables put names and defaults in code spans.
//
// The field's type is the setting's: string, bool, int, time.Duration or
// []string (comma-separated). Settings generates the flags (Flags), reads
// them back (FromCommand), fills Defaults and renders the docs' tables
// (DocTables) from these tags.
type Setting struct {
	Section string // the section's name: the `section` tag of its Config field
	Flag    string // "addr"
	Env     string // "GATEHOUSE_ADDR"
	Default string // the `default` tag
	Empty   string
	Usage   string
	Doc     string
	Type    reflect.Type

	index []int // of the field in Config
	def   reflect.Value
}

// Field returns the setting's field in c, settable.
func (s Setting) Field(c *Config) reflect.Value {
	return reflect.ValueOf(c).Elem().FieldByIndex(s.index)
}

// section is one section of Config.
type section struct {
	name, doc string
	index     []int
}

// Settings lists every setting in declaration order: sections in Config's
// order, fields in each section's. A malformed declaration panics, so any
// test of this package finds it.
func Settings() []Setting { return declared() }

var declared = sync.OnceValue(func() []Setting {
	out, err := settingsOf(reflect.TypeFor[Config]())
	if err != nil {
		panic(err)
	}
	return out
})

func sections() []section {
	t := reflect.TypeFor[Config]()
	var out []section
	for i := range t.NumField() {
		f := t.Field(i)
		if name, ok := f.Tag.Lookup("section"); ok {
			out = append(out, section{name: name, doc: f.Tag.Get("doc"), index: f.Index})
		}
	}
	return out
}

// settingsOf reads the declarations of the sections of the struct type t.
func settingsOf(t reflect.Type) ([]Setting, error) {
	var out []Setting
	seen := map[string]bool{}
	for i := range t.NumField() {
		sf := t.Field(i)
		name, ok := sf.Tag.Lookup("section")
		if !ok {
			continue
		}
		if sf.Type.Kind() != reflect.Struct {
			return nil, fmt.Errorf("config: section %s: %s is not a struct", name, sf.Type)
		}
		if !reflect.PointerTo(sf.Type).Implements(reflect.TypeFor[validator]()) {
			return nil, fmt.Errorf("config: section %s: %s has no Validate() error method", name, sf.Type)
		}
		for j := range sf.Type.NumField() {
			f := sf.Type.Field(j)
			s := Setting{
				Section: name,
				Flag:    f.Tag.Get("flag"),
				Default: f.Tag.Get("default"),
				Empty:   f.Tag.Get("empty"),
				Usage:   f.Tag.Get("usage"),
				Doc:     f.Tag.Get("doc"),
				Type:    f.Type,
				index:   []int{i, j},
			}
			if s.Flag == "" || s.Usage == "" {
				return nil, fmt.Errorf("config: %s.%s: a setting needs the flag and usage tags", sf.Name, f.Name)
			}
			if seen[s.Flag] {
				return nil, fmt.Errorf("config: setting %s is declared twice", s.Flag)
			}
			seen[s.Flag] = true
			s.Env = envName(s.Flag)
			if s.Doc == "" {
				s.Doc = s.Usage
			}
			def, err := parseValue(f.Type, s.Default)
			if err != nil {
				return nil, fmt.Errorf("config: %s: default %q: %w", s.Env, s.Default, err)
			}
			s.def = def
			out = append(out, s)
		}
	}
	return out, nil
}

// parseValue reads text as a value of type t; empty text is the zero value.
func parseValue(t reflect.Type, text string) (reflect.Value, error) {
	v := reflect.New(t).Elem()
	switch t {
	case reflect.TypeFor[string](), reflect.TypeFor[bool](), reflect.TypeFor[int](), reflect.TypeFor[time.Duration](), reflect.TypeFor[[]string]():
	default:
		return v, fmt.Errorf("type %s is not a setting type (string, bool, int, time.Duration, []string)", t)
	}
	if text == "" {
		return v, nil
	}
	switch t {
	case reflect.TypeFor[string]():
		v.SetString(text)
	case reflect.TypeFor[bool]():
		b, err := strconv.ParseBool(text)
		if err != nil {
			return v, err
		}
		v.SetBool(b)
	case reflect.TypeFor[int]():
		n, err := strconv.Atoi(text)
		if err != nil {
			return v, err
		}
		v.SetInt(int64(n))
	case reflect.TypeFor[time.Duration]():
		d, err := time.ParseDuration(text)
		if err != nil {
			return v, err
		}
		v.SetInt(int64(d))
	case reflect.TypeFor[[]string]():
		var list []string
		for e := range strings.SplitSeq(text, ",") {
			list = append(list, strings.TrimSpace(e))
		}
		v.Set(reflect.ValueOf(list))
	}
	return v, nil
}

// envName is the environment variable of the setting with that flag.
func envName(flag string) string {
	return "GATEHOUSE_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// envOf is the environment variable of the setting declared by the field
// of the section *sec that field points to: Validate names a setting
// through its declaration (envOf(w, &w.PerApp)), never by a copy of its
// name. A pointer to anything but a setting of *sec panics, so every test
// that reaches the message finds the slip.
func envOf[S any](sec *S, field any) string { return envName(flagOf(sec, field)) }

// flagOf is the flag of that setting (see envOf).
func flagOf[S any](sec *S, field any) string {
	v := reflect.ValueOf(sec).Elem()
	p := reflect.ValueOf(field)
	if p.Kind() == reflect.Pointer {
		for i := range v.NumField() {
			f := v.Field(i)
			flag, ok := v.Type().Field(i).Tag.Lookup("flag")
			if ok && f.Type() == p.Type().Elem() && f.Addr().UnsafePointer() == p.UnsafePointer() {
				return flag
			}
		}
	}
	panic(fmt.Sprintf("config: %T is not a setting of %T", field, sec))
}

// invalidf is the error of the setting envOf(sec, field): its
// environment variable, a colon, then the message (%w wraps, as in
// fmt.Errorf).
func invalidf[S any](sec *S, field any, format string, args ...any) error {
	return fmt.Errorf("%s: "+format, append([]any{envOf(sec, field)}, args...)...)
}

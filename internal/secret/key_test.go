package secret

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"
)

func TestParseKey(t *testing.T) {
	t.Parallel()
	// 0xfb 0xff... makes '+' '/' in the standard alphabet and '-' '_' in the URL one.
	key := bytes.Repeat([]byte{0xfb, 0xff, 0x01, 0x02}, KeySize/4)
	for name, in := range map[string]string{
		"standard":          base64.StdEncoding.EncodeToString(key),
		"standard unpadded": base64.RawStdEncoding.EncodeToString(key),
		"url":               base64.URLEncoding.EncodeToString(key),
		"url unpadded":      base64.RawURLEncoding.EncodeToString(key),
		"surrounding space": "  " + base64.StdEncoding.EncodeToString(key) + "\n",
	} {
		got, err := ParseKey(in)
		if err != nil || !bytes.Equal(got, key) {
			t.Errorf("%s: got %x, %v; want the key", name, got, err)
		}
	}
}

func TestParseKeyErrors(t *testing.T) {
	t.Parallel()
	for name, tt := range map[string]struct{ in, want string }{
		"empty":        {"", "empty"},
		"blank":        {"   ", "empty"},
		"16 bytes":     {base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("k"), 16)), "16 bytes"},
		"33 bytes":     {base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("k"), 33)), "33 bytes"},
		"not base64":   {"this is not base64 at all!!", "not valid base64"},
		"mixed alphas": {"ab+_" + strings.Repeat("A", 40), "not valid base64"},
	} {
		_, err := ParseKey(tt.in)
		if err == nil {
			t.Errorf("%s: no error", name)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, tt.want) || !strings.Contains(msg, "32") {
			t.Errorf("%s: error %q should say %q and that 32 bytes are wanted", name, msg, tt.want)
		}
		if v := strings.TrimSpace(tt.in); v != "" && strings.Contains(msg, v) {
			t.Errorf("%s: error %q echoes the value", name, msg)
		}
	}
}

func TestParseKeyFeedsSealer(t *testing.T) {
	t.Parallel()
	key, err := ParseKey(base64.StdEncoding.EncodeToString(RandomBytes(KeySize)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewSealer(key); err != nil {
		t.Fatal(err)
	}
}

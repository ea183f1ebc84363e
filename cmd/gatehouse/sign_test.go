package main

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"net/url"
	"strings"
	"testing"
)

func TestSignCommand(t *testing.T) {
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"gatehouse", "sign", "--app-key", "demo-app", "--app-secret", "s3cr3t",
		"http://127.0.0.1:8080/api/v1/orders/query?order_no=SO1001&page=2"}, strings.NewReader(""), &out, &errOut)
	if err != nil {
		t.Fatalf("sign: %v (%s)", err, errOut.String())
	}
	u, err := url.Parse(strings.TrimSpace(out.String()))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	sum := md5.Sum([]byte("s3cr3t" + q.Get("timestamp") + q.Get("nonce") + "order_noSO1001page2"))
	if u.Path != "/api/v1/orders/query" || q.Get("app_key") != "demo-app" || q.Get("sign") != hex.EncodeToString(sum[:]) || q.Get("nonce") == "" {
		t.Fatalf("signed URL %s", u)
	}

	out.Reset()
	if err := run(context.Background(), []string{"gatehouse", "sign", "--app-key", "k", "--app-secret", "s", "--sign-type", "HMAC-SHA256", "http://h/x?a=1"},
		strings.NewReader(""), &out, &errOut); err != nil || !strings.Contains(out.String(), "sign_type=HMAC-SHA256") {
		t.Fatalf("HMAC: %v %s", err, out.String())
	}
	for _, args := range [][]string{
		{"sign", "--app-key", "k", "--app-secret", "s"},                                     // no URL
		{"sign", "--app-key", "k", "--app-secret", "s", "--sign-type", "SHA1", "http://h/"}, // bad sign type
		{"sign", "--app-key", "k", "--app-secret", "s", "http://h/x?sign=1"},                // already signed
	} {
		if err := run(context.Background(), append([]string{"gatehouse"}, args...), strings.NewReader(""), &bytes.Buffer{}, &bytes.Buffer{}); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

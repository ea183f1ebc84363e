package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"gatehouse/internal/app/apptest"
	"gatehouse/internal/webhook/sender"
)

// TestWebhookListen: the receiver answers 204 to a delivery signed with
// its secret and prints it with its bizData, and 401 to a forged one.
func TestWebhookListen(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	secret := sender.NewSecret()
	ctx, cancel := context.WithCancel(context.Background())
	var out apptest.SyncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"gatehouse", "webhook", "listen", "--addr", addr, "--secret", secret}, strings.NewReader(""), &out, &out)
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("listen: %v", err)
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), "listening on") {
		if time.Now().After(deadline) {
			t.Fatalf("not listening: %s", out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	body := []byte(`{"eventType":"order.paid","bizData":"{\"order_no\":\"SO1002\"}","callbackUrl":"http://x/hook","retryCount":0,"maxRetry":5,"createTime":1795344238279}`)
	post := func(secret string) int {
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/hook", bytes.NewReader(body))
		now := time.Now()
		req.Header.Set(sender.HeaderID, "msg_1")
		req.Header.Set(sender.HeaderTimestamp, strconv.FormatInt(now.Unix(), 10))
		req.Header.Set(sender.HeaderSignature, sender.Sign("msg_1", now, body, secret))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if st := post(secret); st != http.StatusNoContent {
		t.Fatalf("signed delivery: %d\n%s", st, out.String())
	}
	if st := post(sender.NewSecret()); st != http.StatusUnauthorized {
		t.Fatalf("forged delivery: %d", st)
	}
	got := out.String()
	for _, want := range []string{"signature:         verified", "eventType: order.paid", `"order_no": "SO1002"`, "INVALID"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if regexp.MustCompile(`v1,[A-Za-z0-9+/]{8}`).MatchString(got) || !strings.Contains(got, "v1,[redacted]") {
		t.Errorf("the output shows a signature:\n%s", got)
	}
}

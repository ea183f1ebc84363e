package payment

import (
	"os"
	"strings"
	"testing"

	"gatehouse/internal/order"
	"gatehouse/internal/outbound"
)

// TestDocsWorkedExample: the worked example in docs/payments.md is what
// gatehouse's own code produces for that refund.
func TestDocsWorkedExample(t *testing.T) {
	const (
		secret    = "psk_5Jd8Qm2Lr9Tz4Vx7"
		timestamp = "1795420800123"
		nonce     = "9f86d081884c7d659a2feaa0c55ad015"
		wantBody  = `{"order_no":"SO1001","amount":"99.90","reason":"customer returned the goods"}`
		wantSig   = "kjPlIcd96ybQ8JSO7z84wK0mQuoSzPYjuUa6F+f+b60="
	)
	body, err := encode(RefundRequest{OrderNo: "SO1001", Amount: order.FormatAmount(9990), Reason: "customer returned the goods"})
	if err != nil || string(body) != wantBody {
		t.Fatalf("body %s, %v", body, err)
	}
	if sig := (outbound.Signer{Secret: []byte(secret)}).Signature(body, timestamp, nonce); sig != wantSig {
		t.Fatalf("signature %s", sig)
	}
	doc, err := os.ReadFile("../../docs/payments.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{secret, timestamp, nonce, wantBody, wantSig, wantBody + timestamp + nonce} {
		if !strings.Contains(string(doc), s) {
			t.Errorf("docs/payments.md does not show %s", s)
		}
	}
}

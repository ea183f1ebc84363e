package partner_test

import (
	"context"
	"net/url"
	"strconv"
	"testing"
	"time"

	"gatehouse/internal/partner"
	"gatehouse/internal/store/storetest"
	"gatehouse/internal/testenv"
	"gatehouse/rest/partnerclient"
)

// BenchmarkGateCheck is the in-process cost of the signed-request checks
// (parse, cached app, MD5, nonce + sliding window on the memory store),
// without HTTP or the business read.
func BenchmarkGateCheck(b *testing.B) {
	db := storetest.Open(b, testenv.Backend{Name: "sqlite"})
	store := openAdmitStore(b, "", "")
	svc := newService(b, db)
	lim := partner.MaxRateLimit
	app, sec, err := svc.Create(context.Background(), partner.CreateInput{AppName: "bench", RateLimit: &lim})
	if err != nil {
		b.Fatal(err)
	}
	g := partner.NewGate(svc, store)
	queries := make([]string, b.N)
	now := time.Now()
	for i := range queries {
		s := partnerclient.Signer{AppKey: app.AppKey, AppSecret: sec.AppSecret,
			Now: func() time.Time { return now }, Nonce: func() string { return "n" + strconv.Itoa(i) }}
		v, err := s.Sign(url.Values{"order_no": {"SO1001"}, "page": {"1"}})
		if err != nil {
			b.Fatal(err)
		}
		queries[i] = v.Encode()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if _, err := g.Check(context.Background(), queries[i]); err != nil {
			b.Fatal(err)
		}
	}
}

package partner_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"gatehouse/internal/partner"
	"gatehouse/internal/partner/admitstore"
	"gatehouse/internal/testenv"
)

// TestNonceRememberedWhileTimestampAccepted: a request stamped 280 s in the
// future is accepted; at +302 s its timestamp is still within the 300 s
// skew, so a replay must be refused as a duplicate (4004), not accepted
// because the nonce was forgotten 5 minutes after arrival. The nonce is
// kept until max(timestamp, arrival) + 5 min, and no longer.
func TestNonceRememberedWhileTimestampAccepted(t *testing.T) {
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		start := time.Date(2027, 5, 1, 9, 0, 0, 0, time.UTC) // ahead of Redis's replay memory start
		clk := newClock(start)
		f := newGateFixture(t, b, start, admitstore.WithClock(clk.Now))
		f.clock = clk
		f.gate.SetClock(clk.Now)
		ctx := context.Background()
		app, sec, err := f.svc.Create(ctx, partner.CreateInput{AppName: "a"})
		if err != nil {
			t.Fatal(err)
		}
		stamped := start.Add(280 * time.Second)
		q := f.query(t, app.AppKey, sec.AppSecret, stamped, url.Values{"order_no": {"SO1"}})
		if _, err := f.gate.Check(ctx, q); err != nil {
			t.Fatalf("future-stamped request: %v", err)
		}
		wantTTL := 280*time.Second + partner.NonceTTL
		if got := f.kv.last.Load().NonceTTL; got != wantTTL {
			t.Fatalf("nonce remembered for %v, want %v (until timestamp + 5 min)", got, wantTTL)
		}
		if !b.Embedded() {
			// Redis keeps its own time: check the key's real expiry instead
			// of moving a clock.
			opt, err := redis.ParseURL(b.RedisURL)
			if err != nil {
				t.Fatal(err)
			}
			rc := redis.NewClient(opt)
			defer rc.Close()
			nonce, _ := url.ParseQuery(q)
			keys, err := rc.Keys(ctx, b.KeyPrefix+"admit:*:n:"+nonce.Get("nonce")).Result()
			if err != nil || len(keys) != 1 {
				t.Fatalf("nonce key: %v %v", keys, err)
			}
			ttl, err := rc.PTTL(ctx, keys[0]).Result()
			if err != nil || ttl < wantTTL-5*time.Second || ttl > wantTTL {
				t.Fatalf("nonce key expires in %v, want about %v", ttl, wantTTL)
			}
			return
		}
		clk.Set(start.Add(302 * time.Second))
		_, err = f.gate.Check(ctx, q)
		if got := reason(err); got != partner.ErrDuplicateNonce.Error() {
			t.Fatalf("replay at +302 s: %s, want %s", got, partner.ErrDuplicateNonce)
		}
		// Once the timestamp is past the skew, the request is expired anyway
		// (4003) and the nonce may go.
		clk.Set(stamped.Add(partner.MaxClockSkew + time.Millisecond))
		if got := reason(func() error { _, err := f.gate.Check(ctx, q); return err }()); !strings.Contains(got, partner.ErrRequestExpired.Error()) {
			t.Fatalf("replay after the skew: %s", got)
		}
	})
}

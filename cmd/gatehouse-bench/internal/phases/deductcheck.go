package phases

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"gatehouse/cmd/gatehouse-bench/internal/gatehouse"
	"gatehouse/rest/partnerclient"
)

// totalStock is the sum of the stocks in m.
func totalStock(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// checkDeductions is the correctness check of a deduction phase: the
// stock of the phase's SKUs fell by exactly the number of successful
// deductions (quantity 1 each; every request of a phase has its own
// biz_no), and repeats of succeeded biz_nos (signed anew) answer 200 with
// Idempotent-Replayed, identical data each time, and deduct nothing.
// A request that failed in transport may or may not have been deducted:
// then the fall must lie between the successes and successes + errors.
func checkDeductions(ctx context.Context, g *gatehouse.Process, c *http.Client, skus []string, before map[string]int64,
	successes, errors int, run string, sample int,
) (string, error) {
	after, err := g.SKUStocks(ctx, skus)
	if err != nil {
		return "", err
	}
	fell := totalStock(before) - totalStock(after)
	if fell < int64(successes) || fell > int64(successes+errors) {
		return "", fmt.Errorf("stock fell by %d, but %d deductions succeeded (%d errors): oversold or lost", fell, successes, errors)
	}
	for _, v := range after {
		if v < 0 {
			return "", fmt.Errorf("negative stock %d", v)
		}
	}
	s := partnerclient.Signer{AppKey: g.AppKey, AppSecret: g.Secret}
	replayed := 0
	// The first requests of the phase were sent first: with no errors they
	// all succeeded.
	for i := 0; i < sample && i < successes && errors == 0; i++ {
		var first []byte
		for range 2 {
			u, err := s.SignURL(fmt.Sprintf("%s/api/v1/inventory/deduct?biz_no=B-%s-%d&sku_id=%s&quantity=1", g.Proc.Base, run, i, skus[i%len(skus)]))
			if err != nil {
				return "", err
			}
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, u, nil)
			resp, err := c.Do(req)
			if err != nil {
				return "", err
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var env struct {
				Code int
				Data json.RawMessage
			}
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Idempotent-Replayed") != "true" || json.Unmarshal(body, &env) != nil || env.Code != 200 {
				return "", fmt.Errorf("repeat of B-%s-%d: HTTP %d, Idempotent-Replayed %q: %.200s", run, i, resp.StatusCode, resp.Header.Get("Idempotent-Replayed"), body)
			}
			if !strings.Contains(string(env.Data), `"biz_no":"B-`+run+"-"+strconv.Itoa(i)+`"`) {
				return "", fmt.Errorf("repeat of B-%s-%d answered another deduction: %s", run, i, env.Data)
			}
			if first == nil {
				first = env.Data
			} else if string(first) != string(env.Data) {
				return "", fmt.Errorf("repeats of B-%s-%d differ: %s / %s", run, i, first, env.Data)
			}
		}
		replayed++
	}
	again, err := g.SKUStocks(ctx, skus)
	if err != nil {
		return "", err
	}
	if totalStock(again) != totalStock(after) {
		return "", fmt.Errorf("repeats deducted again: stock %d → %d", totalStock(after), totalStock(again))
	}
	return fmt.Sprintf("stock fell by %d for %d successes (%d errors), never below 0; %d biz_nos repeated twice each: identical replays, nothing deducted",
		fell, successes, errors, replayed), nil
}

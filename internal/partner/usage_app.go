package partner

import (
	"context"
	"fmt"
	"time"

	"gatehouse/ent"
	"gatehouse/ent/apiusage"
)

// DayCount is one app's calls of one version on one UTC day.
type DayCount struct {
	Day     string // YYYY-MM-DD
	Version string
	Calls   int64
}

// AppDaily returns app appID's calls per UTC day and version over the
// last UsageWindowDays days, today included, oldest day first (what the
// flushes have written so far).
func (u *Usage) AppDaily(ctx context.Context, appID int) ([]DayCount, error) {
	since := u.now().UTC().AddDate(0, 0, -(UsageWindowDays - 1)).Format(time.DateOnly)
	rows, err := u.client.APIUsage.Query().
		Where(apiusage.AppID(appID), apiusage.DayGTE(since)).
		Order(ent.Asc(apiusage.FieldDay), ent.Asc(apiusage.FieldVersion)).
		All(ctx)
	if err != nil {
		return nil, fmt.Errorf("API usage of app %d: %w", appID, err)
	}
	out := make([]DayCount, len(rows))
	for i, r := range rows {
		out[i] = DayCount{Day: r.Day, Version: r.Version, Calls: r.Count}
	}
	return out, nil
}

package phases

import (
	"context"
	"net/http"

	"gatehouse/cmd/gatehouse-bench/internal/bench"
	"gatehouse/cmd/gatehouse-bench/internal/gatehouse"
	"gatehouse/cmd/gatehouse-bench/internal/load"
	"gatehouse/cmd/gatehouse-bench/internal/proc"
	"gatehouse/cmd/gatehouse-bench/internal/report"
)

// ticketFloorName names the floor of ticket creation in the report.
func ticketFloorName(label string) string {
	return "minimal handler: one plain INSERT of a ticket row per request, " + label
}

// ticketPhases measures the ticket-creation floor (a baseline process
// started with floorArgs) and then gatehouse's ticket creation back to
// back, and gatehouse's list of the newest 20 against listBase.
func ticketPhases(ctx context.Context, o bench.Options, rep *report.Report, g *gatehouse.Process, c *http.Client, self, tmp, label string, floorArgs []string, listBaseName string, listBase load.Result) error {
	addr, err := proc.FreeAddr()
	if err != nil {
		return err
	}
	floor, err := proc.Start(ctx, "baseline insert "+label, self, append([]string{"baseline", "-addr", addr}, floorArgs...), nil, addr, tmp)
	if err != nil {
		return err
	}
	floorLoad := load.Measure(ctx, o, c, load.PostJSON(floor.Base+"/t", gatehouse.TicketBody))
	if err := floor.Stop(); err != nil {
		return err
	}
	name := ticketFloorName(label)
	rep.Baselines[name] = floorLoad
	create := load.Measure(ctx, o, c, load.PostJSON(g.Proc.Base+"/api/tickets", gatehouse.TicketBody))
	rep.Add("ticket create (POST /api/tickets), "+label, create, name, floorLoad)
	list := load.Measure(ctx, o, c, load.Repeat(g.Proc.Base+"/api/tickets?limit=20"))
	rep.Add("ticket list (GET /api/tickets?limit=20), "+label, list, listBaseName, listBase)
	return nil
}

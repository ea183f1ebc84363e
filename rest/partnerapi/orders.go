package partnerapi

import (
	"net/http"

	"gatehouse/internal/order"
	"gatehouse/internal/partner"
)

// orderQuery is GET /api/v{n}/orders/query, replying with the version's
// presenter: the query and its rules are the same in every version. shows
// is what the presenter uses of an order (only that is read).
func orderQuery[T any](present func(order.Order) T, shows order.Fields) func(Partner) http.Handler {
	return orderQueryCarrying(func(o order.Order, _ Carries) T { return present(o) }, shows)
}

// orderQueryCarrying is orderQuery for a version that removes fields: its
// presenter is told which of them the reply still carries.
func orderQueryCarrying[T any](present func(order.Order, Carries) T, shows order.Fields) func(Partner) http.Handler {
	return func(h Partner) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			adm, _ := partner.AdmittedFromContext(r.Context())
			q, err := order.ParseQuery(adm.Query.Get)
			if err != nil {
				WritePartnerError(w, r, h.Log, err)
				return
			}
			o, err := h.Orders.QueryForApp(r.Context(), adm.App.ID, q.OrderNo, shows)
			if err != nil {
				WritePartnerError(w, r, h.Log, err)
				return
			}
			WriteEnvelope(w, r, present(o, carriesFromContext(r.Context())))
		})
	}
}

package partnerapi

import (
	"errors"
	"log/slog"
	"net/http"

	"gatehouse/internal/inventory"
	"gatehouse/internal/partner"
)

// Inventory is the partner API's stock deduction,
// POST /api/v{n}/inventory/deduct, behind the signed-request gate: its
// parameters are the signed query parameters biz_no, sku_id and quantity.
// The rules are inventory.Service.Deduct's; this only decodes and maps.
type Inventory struct {
	Svc *inventory.Service
	Log *slog.Logger
}

// HeaderReplayed marks a reply that is the stored result of an earlier
// request with the same biz_no.
const HeaderReplayed = "Idempotent-Replayed"

// codeBusinessFailed is 5001 as the deduction uses it: a repeat of a
// biz_no whose deduction failed (the partner API gives the code this
// second meaning).
const codeBusinessFailed = CodeOrderNotFound

// stockDeduction is the deduction endpoint of PartnerAPI.
func stockDeduction(p Partner) http.Handler { return Inventory{Svc: p.Inventory, Log: p.Log} }

// ServeHTTP deducts for the admitted caller.
func (h Inventory) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	adm, ok := partner.AdmittedFromContext(r.Context())
	if !ok || adm.App == nil {
		h.writeError(w, r, "", errors.New("inventory: deduction reached without the signed-request gate"))
		return
	}
	in, err := inventory.ParseDeduct(adm.Query.Get)
	if err != nil {
		h.writeError(w, r, in.BizNo, err)
		return
	}
	in.Path = r.URL.Path
	res, err := h.Svc.Deduct(r.Context(), adm.App.AppKey, in)
	if err != nil {
		h.writeError(w, r, in.BizNo, err)
		return
	}
	if res.Replayed {
		w.Header().Set(HeaderReplayed, "true")
	}
	WriteEnvelope(w, r, deductionReply(res.Deduction))
}

// deductionReplies are the deduction outcomes whose replies the partner
// API words itself (status, code and whole message); every other error is
// mapped by its kind in WritePartnerError.
var deductionReplies = []struct {
	err          error
	status, code int
	msg          string
	retryLater   bool
}{
	{inventory.ErrInsufficientStock, http.StatusConflict, CodeParamInvalid, "insufficient stock", false},
	{inventory.ErrBusinessFailed, http.StatusConflict, codeBusinessFailed, "business failed", false},
	{inventory.ErrParamsMismatch, http.StatusUnprocessableEntity, CodeParamInvalid,
		message(codeInfo[CodeParamInvalid].meaning, "biz_no was already used with a different sku_id or quantity"), false},
	{inventory.ErrInProgress, http.StatusConflict, CodeSystemError,
		message(codeInfo[CodeSystemError].meaning, "a deduction with this biz_no is still in progress; retry later with the same biz_no"), true},
}

// writeError answers a failed deduction. An unexpected error left the
// deduction rolled back and its record failed (2); its text is logged
// (with the biz_no), never shown.
func (h Inventory) writeError(w http.ResponseWriter, r *http.Request, bizNo string, err error) {
	for _, d := range deductionReplies {
		if errors.Is(err, d.err) {
			if d.retryLater {
				w.Header().Set("Retry-After", "1")
			}
			WriteEnvelopeErrorStatus(w, r, d.status, d.code, d.msg)
			return
		}
	}
	WritePartnerError(w, r, h.Log.With("biz_no", bizNo), err)
}

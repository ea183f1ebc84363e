package rest

import (
	"errors"
	"log/slog"
	"net/http"

	"gatehouse/internal/httpx"
	"gatehouse/internal/inventory"
	"gatehouse/internal/partner"
)

// Inventory serves the partner API's stock deduction,
// POST /api/v1/inventory/deduct, behind the signed-request gate: its
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
// biz_no whose deduction failed (the seed gives the code this second
// meaning).
const codeBusinessFailed = CodeOrderNotFound

// Route is the deduction as a signed partner route (Partner.Extra).
func (h Inventory) Route() PartnerRoute {
	return PartnerRoute{Version: "v1", Method: http.MethodPost, Path: "/inventory/deduct", Handler: http.HandlerFunc(h.deduct)}
}

func (h Inventory) deduct(w http.ResponseWriter, r *http.Request) {
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
	res, err := h.Svc.Deduct(r.Context(), adm.App.AppKey, in)
	if err != nil {
		h.writeError(w, r, in.BizNo, err)
		return
	}
	if res.Replayed {
		w.Header().Set(HeaderReplayed, "true")
	}
	WriteEnvelope(w, r, res.Deduction)
}

// writeError maps the deduction's outcomes to the envelope (CONTRACT §2).
func (h Inventory) writeError(w http.ResponseWriter, r *http.Request, bizNo string, err error) {
	var ve *inventory.ValidationError
	switch {
	case errors.As(err, &ve):
		WriteEnvelopeError(w, r, CodeParamInvalid, ve.Error())
	case errors.Is(err, inventory.ErrInsufficientStock):
		WriteEnvelopeErrorStatus(w, r, http.StatusConflict, CodeParamInvalid, "insufficient stock")
	case errors.Is(err, inventory.ErrNotFound):
		WriteEnvelopeError(w, r, CodeParamInvalid, "sku_id: no such SKU")
	case errors.Is(err, inventory.ErrBusinessFailed):
		WriteEnvelopeErrorStatus(w, r, http.StatusConflict, codeBusinessFailed, "business failed")
	case errors.Is(err, inventory.ErrParamsMismatch):
		WriteEnvelopeErrorStatus(w, r, http.StatusUnprocessableEntity, CodeParamInvalid,
			message(codeInfo[CodeParamInvalid].meaning, "biz_no was already used with a different sku_id or quantity"))
	case errors.Is(err, inventory.ErrForbidden):
		WriteEnvelopeError(w, r, CodePermissionDenied, "biz_no belongs to another app")
	case errors.Is(err, inventory.ErrInProgress):
		w.Header().Set("Retry-After", "1")
		WriteEnvelopeErrorStatus(w, r, http.StatusConflict, CodeSystemError,
			message(codeInfo[CodeSystemError].meaning, "a deduction with this biz_no is still in progress; retry later with the same biz_no"))
	case errors.Is(err, inventory.ErrUnavailable):
		h.Log.ErrorContext(r.Context(), "stock deduction: database unavailable", "err", err, "biz_no", bizNo, "request_id", httpx.GetRequestID(r.Context()))
		WriteEnvelopeErrorStatus(w, r, http.StatusServiceUnavailable, CodeSystemError,
			message(codeInfo[CodeSystemError].meaning, "a dependency is unavailable, retry later"))
	default:
		// The deduction was rolled back and its record failed (2); the
		// error's text is for the log only.
		h.Log.ErrorContext(r.Context(), "stock deduction failed", "err", err, "biz_no", bizNo, "request_id", httpx.GetRequestID(r.Context()))
		WriteEnvelopeError(w, r, CodeSystemError, "")
	}
}

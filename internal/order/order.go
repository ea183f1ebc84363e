// Package order is the order domain of the partner API: orders belong to
// one partner app, amounts are integer minor units (cents), and the query
// tells "no such order" (5001) apart from "another app's order" (5003).
package order

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"

	"gatehouse/ent"
	entorder "gatehouse/ent/order"
	"gatehouse/ent/partnerapp"
	"gatehouse/internal/errs"
	"gatehouse/internal/store"
)

// Errors of the service, for errors.Is. Bad input is an errs.Validation
// error naming the field (the query parameter or GraphQL field).
var (
	// ErrNotFound: no order has that number (5001).
	ErrNotFound = errs.New(errs.NotFound, "order does not exist")
	// ErrForbidden: the order belongs to another app (5003).
	ErrForbidden = errs.New(errs.Forbidden, "the order belongs to another app")
	// ErrConflict: the order number is taken.
	ErrConflict = errs.New(errs.Conflict, "order number already exists")
)

// Status is an order status.
type Status = entorder.Status

// The order statuses.
const (
	Created   Status = entorder.StatusCREATED
	Paid      Status = entorder.StatusPAID
	Cancelled Status = entorder.StatusCANCELLED
	Refunded  Status = entorder.StatusREFUNDED
)

// Limits of the order fields.
const (
	MaxOrderNoLen       = 64
	MaxCustomerNameLen  = 128
	MaxCustomerPhoneLen = 32
	MaxCustomerEmailLen = 254
)

// Order is the service's view of an order.
type Order struct {
	ID      int
	OrderNo string
	AppID   int
	// Amount is in minor units: 9990 is 99.90.
	Amount        int64
	Status        Status
	CustomerName  string
	CustomerPhone string
	CustomerEmail string
	CreateTime    time.Time
	PayTime       *time.Time
}

func fromEnt(r *ent.Order) Order {
	o := Order{
		ID:            r.ID,
		OrderNo:       r.OrderNo,
		AppID:         r.AppID,
		Amount:        r.Amount,
		Status:        r.Status,
		CustomerName:  r.CustomerName,
		CustomerPhone: r.CustomerPhone,
		CustomerEmail: r.CustomerEmail,
		CreateTime:    r.CreateTime.UTC(),
	}
	if r.PayTime != nil {
		t := r.PayTime.UTC()
		o.PayTime = &t
	}
	return o
}

// Service reads and creates orders.
type Service struct {
	client *ent.Client
	now    func() time.Time
	// get and getSummary are the order reads of the signed order
	// queries, prepared.
	get, getSummary *store.Stmt
}

// The order reads name the table and its columns by Ent's constants, so
// that a renamed field breaks the build rather than the query.
const (
	// summaryColumns are what a Summary holds.
	summaryColumns = entorder.FieldID + ", " + entorder.FieldAppID + ", " + entorder.FieldAmount + ", " + entorder.FieldStatus
	// byOrderNo ends a read of one order by its number.
	byOrderNo = " FROM " + entorder.Table + " WHERE " + entorder.FieldOrderNo + " = ?"

	// getSQL reads an order by number: every column Order holds.
	getSQL = "SELECT " + summaryColumns + ", " + entorder.FieldCustomerName + ", " + entorder.FieldCustomerPhone + ", " +
		entorder.FieldCustomerEmail + ", " + entorder.FieldCreateTime + ", " + entorder.FieldPayTime + byOrderNo
	// getSummarySQL reads what a Summary holds.
	getSummarySQL = "SELECT " + summaryColumns + byOrderNo
)

// NewService returns a Service over db.
func NewService(db *store.DB) *Service {
	return &Service{client: db.Client, now: time.Now, get: store.NewStmt(db, getSQL), getSummary: store.NewStmt(db, getSummarySQL)}
}

// Fields says what an order read returns.
type Fields int

const (
	// AllFields is every field of Order.
	AllFields Fields = iota
	// Summary is the ID, number, owner, amount and status; the customer
	// and the times are left zero (not read: a reply that does not show
	// them saves the columns' transfer and time parsing).
	Summary
)

// SetClock replaces the clock used for create and pay times (tests).
func (s *Service) SetClock(now func() time.Time) { s.now = now }

// QueryForApp returns the fields f of order orderNo when it belongs to app
// appID: ErrNotFound when no order has that number, ErrForbidden when
// another app owns it.
func (s *Service) QueryForApp(ctx context.Context, appID int, orderNo string, f Fields) (Order, error) {
	get := s.Get
	if f == Summary {
		get = s.summary
	}
	o, err := get(ctx, orderNo)
	if err != nil {
		return Order{}, err
	}
	if o.AppID != appID {
		return Order{}, ErrForbidden
	}
	return o, nil
}

// Get returns order orderNo whoever owns it (admin use).
func (s *Service) Get(ctx context.Context, orderNo string) (Order, error) {
	// One prepared statement rather than an Ent query: this read runs on
	// every signed order query, and Ent would build its SQL (and SQLite
	// parse it) each time.
	// One struct holds every scan target: one allocation, not one each.
	var r struct {
		id, appID           int
		amount              int64
		status              string
		name, phone, email  sql.NullString
		createTime, payTime sql.NullTime
	}
	err := s.get.QueryRow(ctx, []any{orderNo},
		&r.id, &r.appID, &r.amount, &r.status, &r.name, &r.phone, &r.email, &r.createTime, &r.payTime)
	if errors.Is(err, sql.ErrNoRows) {
		return Order{}, ErrNotFound
	}
	if err != nil {
		return Order{}, fmt.Errorf("get order: %w", err)
	}
	o := Order{
		ID: r.id, OrderNo: orderNo, AppID: r.appID, Amount: r.amount, Status: Status(r.status),
		CustomerName: r.name.String, CustomerPhone: r.phone.String, CustomerEmail: r.email.String,
		CreateTime: r.createTime.Time.UTC(),
	}
	if r.payTime.Valid {
		t := r.payTime.Time.UTC()
		o.PayTime = &t
	}
	return o, nil
}

// summary is Get of the Summary fields.
func (s *Service) summary(ctx context.Context, orderNo string) (Order, error) {
	o := Order{OrderNo: orderNo}
	var status string
	err := s.getSummary.QueryRow(ctx, []any{orderNo}, &o.ID, &o.AppID, &o.Amount, &status)
	if errors.Is(err, sql.ErrNoRows) {
		return Order{}, ErrNotFound
	}
	if err != nil {
		return Order{}, fmt.Errorf("get order: %w", err)
	}
	o.Status = Status(status)
	return o, nil
}

// CreateInput creates an order (admin, demo and tests; partners do not
// create orders through the API).
type CreateInput struct {
	AppID   int
	OrderNo string
	// Amount is a decimal string with at most two decimals: "99.90", "100".
	Amount        string
	CustomerName  string
	CustomerPhone string
	CustomerEmail string
	// Status defaults to CREATED. An order created PAID or REFUNDED (the
	// demo's examples) is paid now.
	Status Status
}

// Create validates and stores an order.
func (s *Service) Create(ctx context.Context, in CreateInput) (Order, error) {
	if err := ValidateNewOrderNo(in.OrderNo); err != nil {
		return Order{}, err
	}
	amount, err := ParseAmount(in.Amount)
	if err != nil {
		return Order{}, err
	}
	st := in.Status
	if st == "" {
		st = Created
	}
	if err := entorder.StatusValidator(st); err != nil {
		return Order{}, errs.Invalid("status", "must be one of CREATED, PAID, CANCELLED, REFUNDED")
	}
	name, err := customerField("customerName", in.CustomerName, MaxCustomerNameLen)
	if err != nil {
		return Order{}, err
	}
	phone, err := customerField("customerPhone", in.CustomerPhone, MaxCustomerPhoneLen)
	if err != nil {
		return Order{}, err
	}
	if strings.ContainsFunc(phone, func(r rune) bool { return !unicode.IsDigit(r) && !strings.ContainsRune("+-() ", r) }) {
		return Order{}, errs.Invalid("customerPhone", "may only hold digits, spaces and + - ( )")
	}
	email, err := customerField("customerEmail", in.CustomerEmail, MaxCustomerEmailLen)
	if err != nil {
		return Order{}, err
	}
	if local, domain, ok := strings.Cut(email, "@"); email != "" && (!ok || local == "" || domain == "" || strings.Contains(domain, "@")) {
		return Order{}, errs.Invalid("customerEmail", "is not an e-mail address")
	}
	now := s.now().UTC().Truncate(time.Millisecond)
	var payTime *time.Time
	if st == Paid || st == Refunded {
		payTime = &now
	}
	exists, err := s.client.PartnerApp.Query().Where(partnerapp.ID(in.AppID)).Exist(ctx)
	if err != nil {
		return Order{}, fmt.Errorf("create order: %w", err)
	}
	if !exists {
		return Order{}, errs.Invalid("appID", "no partner app has id %d", in.AppID)
	}
	row, err := s.client.Order.Create().
		SetOrderNo(in.OrderNo).
		SetAppID(in.AppID).
		SetAmount(amount).
		SetStatus(st).
		SetCustomerName(name).
		SetCustomerPhone(phone).
		SetCustomerEmail(email).
		SetCreateTime(now).
		SetNillablePayTime(payTime).
		Save(ctx)
	if ent.IsConstraintError(err) {
		return Order{}, fmt.Errorf("%w: %q", ErrConflict, in.OrderNo)
	}
	if err != nil {
		return Order{}, fmt.Errorf("create order: %w", err)
	}
	return fromEnt(row), nil
}

// ValidateNewOrderNo checks the number of a new order: 1–64 printable
// ASCII characters without spaces.
func ValidateNewOrderNo(no string) error {
	if no == "" || len(no) > MaxOrderNoLen {
		return errs.Invalid("orderNo", "must be 1 to %d characters", MaxOrderNoLen)
	}
	for i := 0; i < len(no); i++ {
		if no[i] < 0x21 || no[i] > 0x7e {
			return errs.Invalid("orderNo", "must be printable ASCII without spaces")
		}
	}
	return nil
}

func customerField(field, v string, maxLen int) (string, error) {
	return errs.Text(field, v, maxLen)
}

package console

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"
)

func (c *Console) adminRoutes(r chi.Router) {
	r.Get("/apps", c.apps)
	r.Post("/apps", c.createApp)
	r.Post("/apps/{id}/enable", c.appStatus(1, "App enabled."))
	r.Post("/apps/{id}/disable", c.appStatus(0, "App disabled: its calls are refused and its webhooks held."))
	r.Post("/apps/{id}/rate-limit", c.appRateLimit)
	r.Post("/apps/{id}/rotate", c.rotateAppSecret)
	r.Get("/keys", c.keys)
	r.Post("/keys", c.createKey)
	r.Post("/keys/{id}/enable", c.simpleAction("enableAPIKey", "API key enabled.", Base+"keys"))
	r.Post("/keys/{id}/disable", c.simpleAction("disableAPIKey", "API key disabled.", Base+"keys"))
	r.Get("/users", c.users)
	r.Post("/users", c.createUser)
	r.Post("/users/{id}/enable", c.simpleAction("enableUser", "User enabled.", Base+"users"))
	r.Post("/users/{id}/disable", c.simpleAction("disableUser", "User disabled: their tokens and sessions are refused.", Base+"users"))
	r.Get("/audit", c.audit)
	r.Get("/versions", c.versions)
	r.Get("/events", c.events)
}

// simpleAction runs a mutation on the {id} of the path and goes to back.
func (c *Console) simpleAction(mutation, msg, back string) http.HandlerFunc {
	doc := fmt.Sprintf(`mutation ConsoleAction($id: ID!) { %s(id: $id) { id } }`, mutation)
	return func(w http.ResponseWriter, r *http.Request) {
		if err := c.query(r, doc, map[string]any{"id": chi.URLParam(r, "id")}, nil); err != nil {
			c.fail(w, r, err)
			return
		}
		c.done(w, r, msg, back)
	}
}

// listData is a simple list page's: rows and a form's last error.
type listData struct {
	Rows       any
	FormError  string
	Prev, Next string
}

// formError answers a refused form on its page: a VALIDATION_FAILED next
// to the form, anything else as an error page.
func (c *Console) formError(w http.ResponseWriter, r *http.Request, err error, reload func(string)) {
	if ae, ok := err.(*apiError); ok && ae.Code == "VALIDATION_FAILED" {
		msg := ae.Message
		if ae.Field != "" && !strings.Contains(msg, ae.Field) {
			msg = ae.Field + ": " + msg
		}
		reload(msg)
		return
	}
	c.fail(w, r, err)
}

const appsListQuery = `query ConsoleAppList { partnerApps(first: 100, orderBy: {field: APP_NAME, direction: ASC}) { edges { node {
  id appName appKey status rateLimit expireDate previousSecretExpiresAt createTime } } } }`

type appRow struct {
	ID, AppName, AppKey, CreateTime string
	Status, RateLimit               int
	ExpireDate                      *string
	PreviousSecretExpiresAt         *string
}

func (c *Console) apps(w http.ResponseWriter, r *http.Request) { c.appsPage(w, r, http.StatusOK, "") }

func (c *Console) appsPage(w http.ResponseWriter, r *http.Request, status int, formErr string) {
	listPage[appRow](c, w, r, status, appsListQuery, "apps", "Apps", formErr)
}

const keysQuery = `query ConsoleKeys { apiKeys(first: 100, orderBy: {field: CREATE_TIME, direction: DESC}) { edges { node {
  id name prefix role status lastUsedAt requestCount createTime } } } }`

const usersQuery = `query ConsoleUsers { users(first: 100, orderBy: {field: USERNAME, direction: ASC}) { edges { node { id username roles status createTime } } } }`

// listPage renders page with the nodes of the one connection doc asks
// for (the first 100) and a form's last error.
func listPage[T any](c *Console, w http.ResponseWriter, r *http.Request, status int, doc, page, title, formErr string) {
	var out map[string]struct{ Edges []struct{ Node T } }
	if err := c.query(r, doc, nil, &out); err != nil {
		c.fail(w, r, err)
		return
	}
	var rows []T
	for _, conn := range out {
		for _, e := range conn.Edges {
			rows = append(rows, e.Node)
		}
	}
	c.render(w, r, status, page, title, listData{Rows: rows, FormError: formErr})
}

// createApp creates an app and shows its secrets once.
func (c *Console) createApp(w http.ResponseWriter, r *http.Request) {
	in := map[string]any{"appName": r.PostFormValue("app_name")}
	if k := strings.TrimSpace(r.PostFormValue("app_key")); k != "" {
		in["appKey"] = k
	}
	if s := strings.TrimSpace(r.PostFormValue("rate_limit")); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			c.appsPage(w, r, http.StatusUnprocessableEntity, "Rate limit: a whole number of requests per second.")
			return
		}
		in["rateLimit"] = n
	}
	var out struct {
		CreatePartnerApp struct {
			AppSecret string
			App       struct{ AppName, AppKey string }
		}
	}
	err := c.query(r, `mutation ConsoleCreateApp($in: CreatePartnerAppInput!) { createPartnerApp(input: $in) { appSecret app { appName appKey } } }`, map[string]any{"in": in}, &out)
	if err != nil {
		c.formError(w, r, err, func(msg string) { c.appsPage(w, r, http.StatusUnprocessableEntity, msg) })
		return
	}
	p := out.CreatePartnerApp
	c.render(w, r, http.StatusOK, "secret", "App created", secretData{
		Heading: "The app secret of " + p.App.AppName + " (app key " + p.App.AppKey + ")", SecretLabel: "App secret", Secret: p.AppSecret, Back: Base + "apps"})
}

func (c *Console) appStatus(status int, msg string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		doc := `mutation ConsoleAppStatus($id: ID!, $in: UpdatePartnerAppInput!) { updatePartnerApp(id: $id, input: $in) { id } }`
		if err := c.query(r, doc, map[string]any{"id": chi.URLParam(r, "id"), "in": map[string]any{"status": status}}, nil); err != nil {
			c.fail(w, r, err)
			return
		}
		c.done(w, r, msg, Base+"apps")
	}
}

func (c *Console) appRateLimit(w http.ResponseWriter, r *http.Request) {
	n, err := strconv.Atoi(strings.TrimSpace(r.PostFormValue("rate_limit")))
	if err != nil {
		c.appsPage(w, r, http.StatusUnprocessableEntity, "Rate limit: a whole number of requests per second.")
		return
	}
	doc := `mutation ConsoleAppRate($id: ID!, $in: UpdatePartnerAppInput!) { updatePartnerApp(id: $id, input: $in) { id } }`
	if err := c.query(r, doc, map[string]any{"id": chi.URLParam(r, "id"), "in": map[string]any{"rateLimit": n}}, nil); err != nil {
		c.formError(w, r, err, func(msg string) { c.appsPage(w, r, http.StatusUnprocessableEntity, msg) })
		return
	}
	c.done(w, r, "Rate limit changed.", Base+"apps")
}

func (c *Console) rotateAppSecret(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	if r.PostFormValue("confirmed") != "yes" {
		c.render(w, r, http.StatusOK, "secret", "Rotate the app secret", secretData{
			Confirm: true, Action: Base + "apps/" + id + "/rotate", Label: "Rotate secret", Cancel: Base + "apps",
			Question: "Give this app a new app secret? The old one keeps verifying signed calls for 24 hours."})
		return
	}
	var out struct {
		RotatePartnerAppSecret struct {
			AppSecret string
			App       struct{ AppName string }
		}
	}
	if err := c.query(r, `mutation ConsoleRotateApp($id: ID!) { rotatePartnerAppSecret(id: $id) { appSecret app { appName } } }`, map[string]any{"id": id}, &out); err != nil {
		c.fail(w, r, err)
		return
	}
	p := out.RotatePartnerAppSecret
	c.render(w, r, http.StatusOK, "secret", "New app secret", secretData{Heading: "The new app secret of " + p.App.AppName, SecretLabel: "App secret", Secret: p.AppSecret, Back: Base + "apps"})
}

type keyRow struct {
	ID, Name, Prefix, Role, CreateTime string
	Status                             int
	LastUsedAt                         *string
	RequestCount                       int64 `json:",string"`
}

func (c *Console) keys(w http.ResponseWriter, r *http.Request) { c.keysPage(w, r, http.StatusOK, "") }

func (c *Console) keysPage(w http.ResponseWriter, r *http.Request, status int, formErr string) {
	listPage[keyRow](c, w, r, status, keysQuery, "keys", "API keys", formErr)
}

func (c *Console) createKey(w http.ResponseWriter, r *http.Request) {
	var out struct {
		CreateAPIKey struct {
			Key    string
			APIKey struct{ Name, Role string }
		}
	}
	vars := map[string]any{"name": r.PostFormValue("name"), "role": r.PostFormValue("role")}
	if err := c.query(r, `mutation ConsoleCreateKey($name: String!, $role: APIKeyRole) { createAPIKey(name: $name, role: $role) { key apiKey { name role } } }`, vars, &out); err != nil {
		c.formError(w, r, err, func(msg string) { c.keysPage(w, r, http.StatusUnprocessableEntity, msg) })
		return
	}
	p := out.CreateAPIKey
	c.render(w, r, http.StatusOK, "secret", "API key created", secretData{Heading: "The " + p.APIKey.Role + " key " + p.APIKey.Name, SecretLabel: "API key (new)", Secret: p.Key, Back: Base + "keys"})
}

type userRow struct {
	ID, Username, CreateTime string
	Roles                    []string
	Status                   int
}

func (c *Console) users(w http.ResponseWriter, r *http.Request) { c.usersPage(w, r, http.StatusOK, "") }

func (c *Console) usersPage(w http.ResponseWriter, r *http.Request, status int, formErr string) {
	listPage[userRow](c, w, r, status, usersQuery, "users", "Users", formErr)
}

func (c *Console) createUser(w http.ResponseWriter, r *http.Request) {
	in := map[string]any{"username": r.PostFormValue("username"), "password": r.PostFormValue("password")}
	if roles := strings.Fields(strings.ReplaceAll(r.PostFormValue("roles"), ",", " ")); len(roles) > 0 {
		in["roles"] = roles
	}
	if err := c.query(r, `mutation ConsoleCreateUser($in: CreateUserInput!) { createUser(input: $in) { id } }`, map[string]any{"in": in}, nil); err != nil {
		c.formError(w, r, err, func(msg string) { c.usersPage(w, r, http.StatusUnprocessableEntity, msg) })
		return
	}
	c.done(w, r, "User created.", Base+"users")
}

type auditRow struct {
	Time, APIKeyName, Mutation, Outcome string
	TargetType, TargetID, ErrorCode     *string
	RequestID                           *string
}

// audit lists the audit log, newest first, a page at a time.
func (c *Console) audit(w http.ResponseWriter, r *http.Request) {
	vars := map[string]any{"first": logPageSize}
	if a := r.URL.Query().Get("after"); a != "" {
		vars["after"] = a
	}
	var out struct {
		AuditEvents struct {
			Edges    []struct{ Node auditRow }
			PageInfo struct {
				HasNextPage bool
				EndCursor   *string
			}
		}
	}
	doc := `query ConsoleAudit($first: Int, $after: Cursor) { auditEvents(first: $first, after: $after, orderBy: {field: TIME, direction: DESC}) {
  edges { node { time apiKeyName mutation outcome targetType targetID errorCode requestID } } pageInfo { hasNextPage endCursor } } }`
	if err := c.query(r, doc, vars, &out); err != nil {
		c.fail(w, r, err)
		return
	}
	data := listData{}
	var rows []auditRow
	for _, e := range out.AuditEvents.Edges {
		rows = append(rows, e.Node)
	}
	data.Rows = rows
	if pi := out.AuditEvents.PageInfo; pi.HasNextPage && pi.EndCursor != nil {
		data.Next = Base + "audit?after=" + urlQueryEscape(*pi.EndCursor)
	}
	if r.URL.Query().Get("after") != "" {
		data.Prev = Base + "audit"
	}
	c.render(w, r, http.StatusOK, "audit", "Audit log", data)
}

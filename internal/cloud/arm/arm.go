// Package arm is the local cloud's Azure Resource Manager front door. It authenticates every
// request (a token of the cloud's own Entra ID for an ARM audience), routes it on its resource
// id to the provider that registered the type, checks the api-version against the type's list,
// applies ARM's throttling, and authorizes the route's RBAC action at the resource's scope
// before the provider's handler runs. Handlers return values; ServeHTTP is the one place that
// writes them (and errors) in ARM's wire format. Long-running operations are tracked here too.
package arm

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/cerulean/cerulean/internal/cloud/arm/armid"
	"github.com/cerulean/cerulean/internal/cloud/authz"
	"github.com/cerulean/cerulean/internal/cloud/entra"
	"github.com/cerulean/cerulean/internal/cloud/faults"
	"github.com/cerulean/cerulean/internal/cloud/httpx"
	"github.com/cerulean/cerulean/internal/cloud/reqlog"
	"github.com/cerulean/cerulean/internal/cloud/store"
)

// Defaults of Config.
const (
	DefaultRetryAfter = time.Second
	DefaultMaxBody    = 1 << 20
)

// Config is what a user of the cloud may tune.
type Config struct {
	// RetryAfter is the poll interval advertised on long-running operations (Retry-After and
	// retry-after-ms); 0 = DefaultRetryAfter. Short, so SDK pollers do not wait their 30 s default.
	RetryAfter time.Duration
	Limits     *Limits // nil = no throttling (the default); &DefaultLimits = Azure's figures
	MaxBody    int64   // request body cap in bytes; 0 = DefaultMaxBody
}

// TokenVerifier checks access tokens of the cloud's Entra ID (entra.Service implements it).
type TokenVerifier interface {
	Verify(ctx context.Context, raw string, accept func(aud string) bool) (*entra.AccessClaims, error)
}

// Options configure the service.
type Options struct {
	Store          *store.Store
	Tokens         TokenVerifier
	Authz          *authz.Authorizer
	BaseURL        string // https://HOST:PORT, for the absolute URLs of operations
	TenantID       string
	SubscriptionID string // the cloud's one subscription
	Config         Config
	Clock          func() time.Time // nil = time.Now
	Logger         *slog.Logger     // nil = discard
}

// Audiences ARM accepts, with or without the trailing slash.
var Audiences = []string{"https://management.core.windows.net", "https://management.azure.com"}

// Caller is the authenticated principal of a request.
type Caller struct {
	ObjectID string
	TenantID string
	AppID    string
}

// Request is what a handler gets: the parsed id, the api-version and the caller.
type Request struct {
	HTTP       *http.Request
	ID         armid.ID
	APIVersion string
	Caller     Caller
	svc        *Service
}

// Context is the request's context.
func (r *Request) Context() context.Context { return r.HTTP.Context() }

// Handler serves one route.
type Handler func(ctx context.Context, r *Request) (httpx.Response, error)

// Type is a resource type and the api-versions accepted for it.
type Type struct {
	Name        string   // e.g. "Microsoft.ManagedIdentity/userAssignedIdentities"
	APIVersions []string // nil: any version another registered type accepts
	// VersionError, when set, answers a version outside APIVersions instead of the front
	// door's 400 InvalidApiVersionParameter (ARM's resource providers say NoRegisteredProviderFound).
	VersionError func(r *http.Request, version string, supported []string) error
}

// Route is one method on a resource or collection of a type.
type Route struct {
	Method     string
	Type       string // a registered Type's Name
	Collection bool   // the id ends at the type (a list or a create-with-generated-name)
	// Action is the RBAC action checked at Scope (default: the resource's id; for a
	// collection, the scope that holds it).
	Action string
	Scope  func(r *Request) string
	// Authorize, when set, replaces the action check (an operation poll by its initiator).
	Authorize func(ctx context.Context, r *Request) error
	// Example is a path that reaches this route, with {subscriptionId} as a placeholder; the
	// route-table tests walk these.
	Example string
	Handle  Handler
}

// Service is the ARM front door.
type Service struct {
	o        Options
	log      *slog.Logger
	now      func() time.Time
	types    map[string]Type
	routes   map[string]Route
	ordered  []Route
	throttle *throttle
	ops      operations
	onDelete map[string]func(tx *store.Tx, r Resource) error
	runners  map[string]Runner
}

// New returns the service; providers register their types and routes on it before it serves.
func New(o Options) *Service {
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Config.RetryAfter <= 0 {
		o.Config.RetryAfter = DefaultRetryAfter
	}
	if o.Config.MaxBody <= 0 {
		o.Config.MaxBody = DefaultMaxBody
	}
	o.BaseURL = strings.TrimSuffix(o.BaseURL, "/")
	s := &Service{
		o: o, log: o.Logger, now: o.Clock,
		types: map[string]Type{}, routes: map[string]Route{},
		throttle: newThrottle(o.Config.Limits, o.Clock),
		onDelete: map[string]func(*store.Tx, Resource) error{},
		runners:  map[string]Runner{},
	}
	s.ops.init()
	s.registerOperations()
	return s
}

// Store is the state providers keep their resources in.
func (s *Service) Store() *store.Store { return s.o.Store }

// Authz is the role-assignment store and checker.
func (s *Service) Authz() *authz.Authorizer { return s.o.Authz }

// TenantID is the cloud's tenant.
func (s *Service) TenantID() string { return s.o.TenantID }

// SubscriptionID is the cloud's subscription.
func (s *Service) SubscriptionID() string { return s.o.SubscriptionID }

// Now is the service clock.
func (s *Service) Now() time.Time { return s.now() }

// RegisterType adds a resource type.
func (s *Service) RegisterType(t Type) { s.types[strings.ToLower(t.Name)] = t }

// Handle adds a route of a registered type.
func (s *Service) Handle(rt Route) {
	if _, ok := s.types[strings.ToLower(rt.Type)]; !ok {
		panic("arm: route for unregistered type " + rt.Type)
	}
	s.routes[routeKey(rt.Method, rt.Type, rt.Collection)] = rt
	s.ordered = append(s.ordered, rt)
}

// APIVersions are the versions a registered type accepts (nil: those of every type).
func (s *Service) APIVersions(typ string) []string {
	if v := s.types[strings.ToLower(typ)].APIVersions; v != nil {
		return slices.Clone(v)
	}
	return s.allVersions()
}

// Routes lists the registered routes in registration order.
func (s *Service) Routes() []Route { return slices.Clone(s.ordered) }

func routeKey(method, typ string, collection bool) string {
	k := method + " " + strings.ToLower(typ)
	if collection {
		k += " *"
	}
	return k
}

// Handles reports whether a path belongs to ARM rather than to Entra ID on the shared listener.
// Any number of leading slashes counts as one: SDKs that build "/{scope}/providers/..." from a
// scope starting with "/" send "//subscriptions/...", which ARM serves as it is.
func Handles(path string) bool {
	first, _, _ := strings.Cut(strings.TrimLeft(path, "/"), "/")
	return strings.EqualFold(first, "subscriptions") || strings.EqualFold(first, "providers")
}

// CleanPath is the path ARM routes on: leading slashes collapsed into one. Empty segments
// further in are left for the resource-id parser, which answers them InvalidResourceId.
func CleanPath(path string) string {
	if !strings.HasPrefix(path, "//") {
		return path
	}
	return "/" + strings.TrimLeft(path, "/")
}

// ServeHTTP is the adapter: it runs the front door and the handler and writes what they return.
func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w, r = s.underPublicName(w, r)
	h := w.Header()
	reqID := uuid.NewString()
	corr := r.Header.Get("x-ms-correlation-request-id")
	if _, err := uuid.Parse(corr); err != nil {
		corr = reqID
	}
	h.Set("x-ms-request-id", reqID)
	h.Set("x-ms-correlation-request-id", corr)
	h.Set("x-ms-routing-request-id", "LOCAL:"+s.now().UTC().Format("20060102T150405Z")+":"+reqID)
	if cid := r.Header.Get("x-ms-client-request-id"); cid != "" && len(cid) <= 128 {
		h.Set("x-ms-client-request-id", cid)
	}
	res, err := s.dispatch(r, h)
	var status int
	if e := (*Error)(nil); errors.As(err, &e) {
		reqlog.SetReason(r.Context(), e.Code+": "+e.Message) // unless the refusal's decider gave one
	}
	if err != nil {
		status = writeError(s.log)(w, r, err)
	} else {
		if r.Method == http.MethodHead {
			res.Body = nil
		}
		status = httpx.Write(w, res)
	}
	level := slog.LevelDebug
	if status >= 500 {
		level = slog.LevelError
	}
	s.log.Log(r.Context(), level, "Served request", "method", r.Method, "path", r.URL.Path, "status", status)
}

// dispatch runs the front door's checks in ARM's order: authentication, throttling, routing,
// api-version, subscription, authorization; then the handler.
func (s *Service) dispatch(r *http.Request, h http.Header) (httpx.Response, error) {
	caller, err := s.authenticate(r)
	if err != nil {
		return httpx.Response{}, err
	}
	reqlog.SetPrincipal(r.Context(), caller.ObjectID)
	if res, ok, err := s.listing(r, caller); ok {
		return res, err
	}
	path := CleanPath(r.URL.Path)
	id, err := armid.Parse(path)
	if err != nil {
		return httpx.Response{}, Errorf(http.StatusBadRequest, "InvalidResourceId", "The resource id '%s' is invalid: %s.", clip(path, 256), strings.TrimPrefix(err.Error(), armid.ErrInvalid.Error()+": "))
	}
	if err := s.take(r, h, id, caller); err != nil {
		return httpx.Response{}, err
	}
	rt, err := s.route(r.Method, id)
	if err != nil {
		return httpx.Response{}, err
	}
	version, err := s.checkAPIVersion(r, rt.Type)
	if err != nil {
		return httpx.Response{}, err
	}
	if err := s.checkSubscription(id); err != nil {
		return httpx.Response{}, err
	}
	req := &Request{HTTP: r, ID: id, APIVersion: version, Caller: caller, svc: s}
	if err := s.authorize(r.Context(), rt, req); err != nil {
		return httpx.Response{}, err
	}
	if lro, rule, ok := faults.LROFrom(r.Context()); ok {
		return s.faultOperation(r.Context(), rt, req, lro, rule)
	}
	return rt.Handle(r.Context(), req)
}

func (s *Service) route(method string, id armid.ID) (Route, error) {
	if id.IsRoot() {
		return Route{}, Errorf(http.StatusNotFound, "InvalidResourceType", "The resource type could not be found.")
	}
	typ := id.ResourceType()
	t, ok := s.types[strings.ToLower(typ)]
	if !ok {
		return Route{}, Errorf(http.StatusNotFound, "InvalidResourceType", "The resource type '%s' could not be found in the namespace '%s'.",
			clip(typ[strings.Index(typ, "/")+1:], 128), clip(id.Last().Namespace, 128))
	}
	rt, ok := s.routes[routeKey(method, t.Name, id.IsCollection())]
	if !ok {
		return Route{}, Errorf(http.StatusMethodNotAllowed, "MethodNotAllowed", "The requested resource does not support http method '%s'.", clip(method, 16))
	}
	return rt, nil
}

func (s *Service) checkAPIVersion(r *http.Request, typ string) (string, error) {
	v := r.URL.Query().Get("api-version")
	if v == "" {
		return "", errMissingAPIVersion()
	}
	t := s.types[strings.ToLower(typ)]
	supported := t.APIVersions
	if supported == nil {
		supported = s.allVersions()
	}
	if !slices.Contains(supported, v) && t.VersionError != nil {
		return "", t.VersionError(r, v, slices.Clone(supported))
	}
	if !slices.Contains(supported, v) {
		return "", Errorf(http.StatusBadRequest, "InvalidApiVersionParameter",
			"The api-version '%s' is invalid. The supported versions are '%s'.", clip(v, 32), strings.Join(supported, ","))
	}
	return v, nil
}

func (s *Service) allVersions() []string {
	var all []string
	for _, t := range s.types {
		all = append(all, t.APIVersions...)
	}
	slices.Sort(all)
	return slices.Compact(all)
}

func (s *Service) checkSubscription(id armid.ID) error {
	sub := id.Subscription()
	if sub == "" {
		return nil
	}
	if _, err := uuid.Parse(sub); err != nil {
		return Errorf(http.StatusBadRequest, "InvalidSubscriptionId", "The provided subscription identifier '%s' is malformed or invalid.", clip(sub, 64))
	}
	if !strings.EqualFold(sub, s.o.SubscriptionID) {
		return Errorf(http.StatusNotFound, "SubscriptionNotFound", "The subscription '%s' could not be found.", sub)
	}
	return nil
}

// ScopeOf is the scope a route's action is checked at by default. Tenant-level reads (the
// root scope: listing subscriptions, role definitions at "/") are checked at the cloud's one
// subscription: the local cloud has no tenant-root assignments.
func (s *Service) ScopeOf(r *Request) string {
	id := r.ID
	if id.IsCollection() {
		id = id.Parent()
	}
	if id.IsRoot() || id.Subscription() == "" {
		return "/subscriptions/" + s.o.SubscriptionID
	}
	return id.String()
}

func (s *Service) authorize(ctx context.Context, rt Route, r *Request) error {
	if rt.Authorize != nil {
		return rt.Authorize(ctx, r)
	}
	scope := s.ScopeOf(r)
	if rt.Scope != nil {
		scope = rt.Scope(r)
	}
	return s.Check(ctx, r.Caller, rt.Action, scope)
}

// Check returns nil if the caller holds the action at scope, else 403 AuthorizationFailed.
func (s *Service) Check(ctx context.Context, c Caller, action, scope string) error {
	err := s.o.Authz.Check(ctx, c.ObjectID, action, scope)
	if errors.Is(err, authz.ErrDenied) {
		reqlog.SetReason(ctx, s.o.Authz.DeniedReason(ctx, c.ObjectID, action, scope))
		return Errorf(http.StatusForbidden, "AuthorizationFailed",
			"The client '%s' with object id '%s' does not have authorization to perform action '%s' over scope '%s' or the scope is invalid. If access was recently granted, please refresh your credentials.",
			c.AppID, c.ObjectID, action, clip(scope, 512))
	}
	return err
}

// take applies throttling and sets the remaining-budget headers.
func (s *Service) take(r *http.Request, h http.Header, id armid.ID, c Caller) error {
	if s.throttle == nil {
		return nil
	}
	sub := id.Subscription()
	if sub == "" {
		sub = s.o.SubscriptionID
	}
	write := r.Method != http.MethodGet && r.Method != http.MethodHead
	left, wait := s.throttle.take(strings.ToLower(sub)+"|"+c.ObjectID, write)
	name := "x-ms-ratelimit-remaining-subscription-reads"
	switch r.Method {
	case http.MethodDelete:
		name = "x-ms-ratelimit-remaining-subscription-deletes"
	case http.MethodPut, http.MethodPatch, http.MethodPost:
		name = "x-ms-ratelimit-remaining-subscription-writes"
	}
	h.Set(name, itoa(left))
	if wait > 0 {
		e := Errorf(http.StatusTooManyRequests, "SubscriptionRequestsThrottled",
			"Number of requests for subscription '%s' and operation '%s' exceeded the backend storage limit. Please try again after '%d' seconds.",
			sub, r.Method, secondsCeil(wait))
		ms := itoa(int(wait / time.Millisecond))
		e.Header = http.Header{"Retry-After": {itoa(secondsCeil(wait))}, "Retry-After-Ms": {ms}, "X-Ms-Retry-After-Ms": {ms}}
		return e
	}
	return nil
}

func secondsCeil(d time.Duration) int { return int((d + time.Second - 1) / time.Second) }

// Service lifecycle.

// Start resumes the long-running operations a previous run left in progress.
func (s *Service) Start(ctx context.Context) error { return s.resumeOperations(ctx) }

// Close stops running operations (they resume at the next Start) and waits for them.
func (s *Service) Close() { s.ops.close() }

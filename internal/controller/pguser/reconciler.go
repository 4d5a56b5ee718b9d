// Package pguser reconciles Azure Service Operator's v1 User: a PostgreSQL role inside a
// FlexibleServer. As ASO does, the manager connects to the server (its host name from the
// FlexibleServer's status, TLS, database postgres) with the administrator's credentials from
// a Secret, creates or alters the role with its password from another Secret, and grants the
// listed roles; deleting the object drops the role. ARM is not involved.
package pguser

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	pgv1 "github.com/cerulean/cerulean/api/dbforpostgresql/v1"
	"github.com/cerulean/cerulean/api/shared"
)

// +kubebuilder:rbac:groups=dbforpostgresql.azure.com,resources=users,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=dbforpostgresql.azure.com,resources=users/status,verbs=get;update;patch

// Names shared with the ARM kinds (Azure Service Operator's).
const (
	finalizer                 = "serviceoperator.azure.com/finalizer"
	annotationReconcilePolicy = "serviceoperator.azure.com/reconcile-policy"
	// annotationAppliedHash identifies the attributes, password and roles last applied.
	annotationAppliedHash = "cerulean.dev/applied-hash"
	indexSecrets          = "cerulean.user.secrets" //nolint:gosec // a field index's name, not a credential
	indexOwner            = "cerulean.user.owner"
)

var serverGVK = schema.GroupVersionKind{Group: "dbforpostgresql.azure.com", Version: "v1api20250801", Kind: "FlexibleServer"}

// Options configure the Reconciler.
type Options struct {
	// Recorder records Events on transitions of Ready.
	Recorder events.EventRecorder
	// Dial connects to a server (nil: a net.Dialer, resolving its Azure name).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Port is the servers' port (default 5432).
	Port uint16
	// SyncPeriod is how often a Ready role is checked (default 1h).
	SyncPeriod time.Duration
}

// Reconciler reconciles Users.
type Reconciler struct {
	client.Client
	opts Options
}

// New returns a Reconciler using c.
func New(c client.Client, opts Options) *Reconciler {
	if opts.Port == 0 {
		opts.Port = 5432
	}
	if opts.SyncPeriod <= 0 {
		opts.SyncPeriod = time.Hour
	}
	return &Reconciler{Client: c, opts: opts}
}

// Errors mapped to Ready reasons.
var (
	errWaitingForOwner = errors.New("owner not ready")
	errSecret          = errors.New("secret missing")
)

// Reconcile brings one role to its spec.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	u := &pgv1.User{}
	if err := r.Get(ctx, req.NamespacedName, u); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !u.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, u)
	}
	if !controllerutil.ContainsFinalizer(u, finalizer) {
		orig := u.DeepCopy()
		controllerutil.AddFinalizer(u, finalizer)
		if err := r.Patch(ctx, u, client.MergeFrom(orig)); err != nil {
			return ctrl.Result{}, fmt.Errorf("add finalizer: %w", err)
		}
	}
	err := r.apply(ctx, u)
	cond := readyFor(err, u.Generation)
	if err != nil {
		log.FromContext(ctx).V(1).Info("Reconcile did not finish", "reason", cond.Reason, "error", cond.Message)
	}
	if werr := r.writeReady(ctx, u, cond); werr != nil {
		return ctrl.Result{}, werr
	}
	switch {
	case err == nil:
		return ctrl.Result{RequeueAfter: r.opts.SyncPeriod}, nil
	case errors.Is(err, errWaitingForOwner) || errors.Is(err, errSecret):
		return ctrl.Result{RequeueAfter: 30 * time.Second}, nil // and when the owner or Secret changes
	default:
		return ctrl.Result{}, err // the workqueue backs off
	}
}

// target is what a pass connects with and applies.
type target struct {
	host, adminUser, adminPassword, password string
}

func (r *Reconciler) gather(ctx context.Context, u *pgv1.User) (*target, error) {
	host, err := r.serverHost(ctx, u)
	if err != nil {
		return nil, err
	}
	if u.Spec.LocalUser == nil || u.Spec.LocalUser.ServerAdminPassword == nil || u.Spec.LocalUser.Password == nil {
		return nil, fmt.Errorf("%w: localUser with serverAdminUsername, serverAdminPassword and password is required", errSecret)
	}
	t := &target{host: host, adminUser: u.Spec.LocalUser.ServerAdminUsername}
	if t.adminPassword, err = r.secretValue(ctx, u.Namespace, u.Spec.LocalUser.ServerAdminPassword); err != nil {
		return nil, err
	}
	if t.password, err = r.secretValue(ctx, u.Namespace, u.Spec.LocalUser.Password); err != nil {
		return nil, err
	}
	return t, nil
}

func (r *Reconciler) apply(ctx context.Context, u *pgv1.User) error {
	t, err := r.gather(ctx, u)
	if err != nil {
		return err
	}
	name := roleName(u)
	conn, err := r.connect(ctx, t)
	if err != nil {
		return redact(err, t)
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	exists, have, err := roleState(ctx, conn, name)
	if err != nil {
		return redact(err, t)
	}
	if u.Annotations[annotationReconcilePolicy] == "skip" {
		if !exists {
			return fmt.Errorf("role %s does not exist and the reconcile policy is skip", name)
		}
		return nil
	}
	hash := appliedHash(u, t.password)
	if exists && u.Annotations[annotationAppliedHash] == hash && len(membershipStatements(name, u.Spec.Roles, have)) == 0 {
		return nil // steady state: nothing written
	}
	if _, err := conn.Exec(ctx, roleStatement(name, exists, u.Spec.RoleOptions, t.password)); err != nil {
		return redact(fmt.Errorf("create or alter role %s: %w", name, err), t)
	}
	for _, stmt := range membershipStatements(name, u.Spec.Roles, have) {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			return redact(fmt.Errorf("%s: %w", stmt, err), t)
		}
	}
	orig := u.DeepCopy()
	if u.Annotations == nil {
		u.Annotations = map[string]string{}
	}
	u.Annotations[annotationAppliedHash] = hash
	if err := r.Patch(ctx, u, client.MergeFrom(orig)); err != nil {
		return fmt.Errorf("record applied role: %w", err)
	}
	return nil
}

func roleName(u *pgv1.User) string {
	if u.Spec.AzureName != "" {
		return u.Spec.AzureName
	}
	return u.Name
}

// roleState reads whether the role exists and the roles it is a member of.
func roleState(ctx context.Context, conn *pgx.Conn, name string) (bool, []string, error) {
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_roles WHERE rolname = $1", name).Scan(&n); err != nil {
		return false, nil, fmt.Errorf("read role %s: %w", name, err)
	}
	if n == 0 {
		return false, nil, nil
	}
	rows, err := conn.Query(ctx, `SELECT g.rolname FROM pg_auth_members m
		JOIN pg_roles g ON g.oid = m.roleid JOIN pg_roles u ON u.oid = m.member WHERE u.rolname = $1`, name)
	if err != nil {
		return false, nil, fmt.Errorf("read memberships of %s: %w", name, err)
	}
	have, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return false, nil, fmt.Errorf("read memberships of %s: %w", name, err)
	}
	return true, have, nil
}

// connect opens a TLS connection to the server's postgres database as its administrator.
// As Azure Service Operator (sslmode=require), the server's certificate is not verified.
func (r *Reconciler) connect(ctx context.Context, t *target) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(fmt.Sprintf("host=%s port=%d dbname=postgres sslmode=require connect_timeout=10", t.host, r.opts.Port))
	if err != nil {
		return nil, fmt.Errorf("configure connection to %s: %w", t.host, err)
	}
	cfg.User, cfg.Password = t.adminUser, t.adminPassword
	if r.opts.Dial != nil {
		cfg.DialFunc = r.opts.Dial
		cfg.LookupFunc = func(_ context.Context, host string) ([]string, error) { return []string{host}, nil }
		for _, fb := range cfg.Fallbacks {
			fb.TLSConfig = cfg.TLSConfig
		}
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to %s as %s: %w", t.host, t.adminUser, err)
	}
	return conn, nil
}

// redact removes the passwords from an error's text, should a driver ever echo one.
func redact(err error, t *target) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	for _, s := range []string{t.adminPassword, t.password} {
		if s != "" {
			msg = strings.ReplaceAll(msg, s, "[redacted]")
		}
	}
	if msg == err.Error() {
		return err
	}
	return errors.New(msg)
}

// serverHost is the owner FlexibleServer's host name, once it is Ready.
func (r *Reconciler) serverHost(ctx context.Context, u *pgv1.User) (string, error) {
	s := &unstructured.Unstructured{}
	s.SetGroupVersionKind(serverGVK)
	if err := r.Get(ctx, client.ObjectKey{Namespace: u.Namespace, Name: u.Spec.Owner.Name}, s); err != nil {
		if apierrors.IsNotFound(err) {
			return "", fmt.Errorf("%w: FlexibleServer %s/%s does not exist", errWaitingForOwner, u.Namespace, u.Spec.Owner.Name)
		}
		return "", fmt.Errorf("read FlexibleServer %s: %w", u.Spec.Owner.Name, err)
	}
	host, _, _ := unstructured.NestedString(s.Object, "status", "fullyQualifiedDomainName")
	if !ready(s) || host == "" {
		return "", fmt.Errorf("%w: FlexibleServer %s is not Ready yet", errWaitingForOwner, u.Spec.Owner.Name)
	}
	if err := r.ownedBy(ctx, u, s); err != nil {
		return "", err
	}
	return host, nil
}

// ownedBy makes the server own the User, as Azure Service Operator does: deleting the
// server deletes its Users.
func (r *Reconciler) ownedBy(ctx context.Context, u *pgv1.User, s *unstructured.Unstructured) error {
	for _, ref := range u.OwnerReferences {
		if ref.UID == s.GetUID() {
			return nil
		}
	}
	orig := u.DeepCopy()
	u.OwnerReferences = append(u.OwnerReferences, metav1.OwnerReference{APIVersion: serverGVK.GroupVersion().String(), Kind: serverGVK.Kind, Name: s.GetName(), UID: s.GetUID()})
	if err := r.Patch(ctx, u, client.MergeFrom(orig)); err != nil {
		return fmt.Errorf("set owner reference: %w", err)
	}
	return nil
}

func ready(o *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == shared.ConditionTypeReady {
			return m["status"] == string(metav1.ConditionTrue)
		}
	}
	return false
}

// secretValue reads a referenced Secret key in the User's namespace; errors name it, never
// its value.
func (r *Reconciler) secretValue(ctx context.Context, namespace string, ref *shared.SecretReference) (string, error) {
	s := &corev1.Secret{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.Name}, s); err != nil {
		if apierrors.IsNotFound(err) {
			return "", fmt.Errorf("%w: Secret %s/%s does not exist", errSecret, namespace, ref.Name)
		}
		return "", fmt.Errorf("read Secret %s/%s: %w", namespace, ref.Name, err)
	}
	v, ok := s.Data[ref.Key]
	if !ok {
		return "", fmt.Errorf("%w: Secret %s/%s has no key %s", errSecret, namespace, ref.Name, ref.Key)
	}
	return string(v), nil
}

// reconcileDelete drops the role unless the policy keeps it; a server already gone (or never
// Ready) took its roles with it.
func (r *Reconciler) reconcileDelete(ctx context.Context, u *pgv1.User) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(u, finalizer) {
		return ctrl.Result{}, nil
	}
	policy := u.Annotations[annotationReconcilePolicy]
	if policy != "skip" && policy != "detach-on-delete" && u.Annotations[annotationAppliedHash] != "" {
		t, err := r.gather(ctx, u)
		switch {
		case errors.Is(err, errWaitingForOwner):
			// the server is gone or going: its roles go with it
		case err != nil:
			_ = r.writeReady(ctx, u, readyFor(err, u.Generation))
			return ctrl.Result{RequeueAfter: 30 * time.Second}, nil
		default:
			if err := r.drop(ctx, t, roleName(u)); err != nil {
				_ = r.writeReady(ctx, u, readyFor(err, u.Generation))
				return ctrl.Result{}, err
			}
		}
	}
	orig := u.DeepCopy()
	controllerutil.RemoveFinalizer(u, finalizer)
	if err := r.Patch(ctx, u, client.MergeFrom(orig)); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	return ctrl.Result{}, nil
}

func (r *Reconciler) drop(ctx context.Context, t *target, name string) error {
	conn, err := r.connect(ctx, t)
	if err != nil {
		return redact(err, t)
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	if _, err := conn.Exec(ctx, "DROP ROLE IF EXISTS "+ident(name)); err != nil {
		return redact(fmt.Errorf("drop role %s: %w", name, err), t)
	}
	return nil
}

// readyFor is the Ready condition of a pass's outcome, with Azure Service Operator's reasons.
func readyFor(err error, generation int64) shared.Condition {
	c := shared.Condition{Type: shared.ConditionTypeReady, ObservedGeneration: generation}
	switch {
	case err == nil:
		c.Status, c.Reason = metav1.ConditionTrue, shared.ReasonSucceeded
	case errors.Is(err, errWaitingForOwner):
		c.Status, c.Severity, c.Reason, c.Message = metav1.ConditionFalse, shared.SeverityInfo, shared.ReasonWaitingForOwner, err.Error()
	case errors.Is(err, errSecret):
		c.Status, c.Severity, c.Reason, c.Message = metav1.ConditionFalse, shared.SeverityWarning, shared.ReasonSecretNotFound, err.Error()
	default:
		c.Status, c.Severity, c.Reason, c.Message = metav1.ConditionFalse, shared.SeverityWarning, shared.ReasonReconciliationFailure, err.Error()
	}
	return c
}

// writeReady writes the Ready condition when it changed; an Event marks a transition.
func (r *Reconciler) writeReady(ctx context.Context, u *pgv1.User, c shared.Condition) error {
	var old *shared.Condition
	for i := range u.Status.Conditions {
		if u.Status.Conditions[i].Type == shared.ConditionTypeReady {
			old = &u.Status.Conditions[i]
		}
	}
	transition := old == nil || old.Status != c.Status || old.Reason != c.Reason || old.Severity != c.Severity
	c.LastTransitionTime = metav1.NewTime(time.Now().UTC().Truncate(time.Second))
	if !transition {
		c.LastTransitionTime = old.LastTransitionTime
		if equality.Semantic.DeepEqual(*old, c) {
			return nil
		}
	}
	u.Status.Conditions = []shared.Condition{c}
	if err := r.Status().Update(ctx, u); err != nil {
		return client.IgnoreNotFound(err)
	}
	if transition && r.opts.Recorder != nil {
		typ, msg := corev1.EventTypeNormal, c.Message
		if c.Severity == shared.SeverityWarning {
			typ = corev1.EventTypeWarning
		}
		if msg == "" {
			msg = "Ready is " + string(c.Status)
		}
		r.opts.Recorder.Eventf(u, nil, typ, c.Reason, "Reconcile", "%s", msg)
	}
	return nil
}

// SetupWithManager watches Users, the Secrets they read and their servers.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	idx := mgr.GetFieldIndexer()
	if err := idx.IndexField(ctx, &pgv1.User{}, indexSecrets, func(o client.Object) []string {
		lu := o.(*pgv1.User).Spec.LocalUser
		var out []string
		if lu != nil && lu.ServerAdminPassword != nil {
			out = append(out, lu.ServerAdminPassword.Name)
		}
		if lu != nil && lu.Password != nil {
			out = append(out, lu.Password.Name)
		}
		return out
	}); err != nil {
		return fmt.Errorf("index Secrets of Users: %w", err)
	}
	if err := idx.IndexField(ctx, &pgv1.User{}, indexOwner, func(o client.Object) []string {
		return []string{o.(*pgv1.User).Spec.Owner.Name}
	}); err != nil {
		return fmt.Errorf("index owners of Users: %w", err)
	}
	server := &unstructured.Unstructured{}
	server.SetGroupVersionKind(serverGVK)
	return ctrl.NewControllerManagedBy(mgr).Named("postgresql-user").
		For(&pgv1.User{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}, deletionStarted()))).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.listBy(indexSecrets))).
		Watches(server, handler.EnqueueRequestsFromMapFunc(r.listBy(indexOwner))).
		Complete(r)
}

func deletionStarted() predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool { return !e.ObjectNew.GetDeletionTimestamp().IsZero() }}
}

func (r *Reconciler) listBy(index string) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		list := &pgv1.UserList{}
		if err := r.List(ctx, list, client.InNamespace(o.GetNamespace()), client.MatchingFields{index: o.GetName()}); err != nil {
			return nil
		}
		out := make([]reconcile.Request, 0, len(list.Items))
		for _, u := range list.Items {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: u.Namespace, Name: u.Name}})
		}
		return out
	}
}

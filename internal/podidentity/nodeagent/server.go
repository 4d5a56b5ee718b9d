package nodeagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	aadv1 "github.com/cerulean/cerulean/api/aadpodidentity/v1"
	"github.com/cerulean/cerulean/internal/podidentity"
)

const imdsTokenPath = "/metadata/identity/oauth2/token"

// imdsToken is IMDS's success body: numbers as strings.
type imdsToken struct {
	AccessToken  string `json:"access_token"`
	RefreshToken string `json:"refresh_token"`
	ExpiresIn    string `json:"expires_in"`
	ExpiresOn    string `json:"expires_on"`
	ExtExpiresIn string `json:"ext_expires_in"`
	NotBefore    string `json:"not_before"`
	Resource     string `json:"resource"`
	TokenType    string `json:"token_type"`
	ClientID     string `json:"client_id"`
}

func (a *Agent) body(t Token) imdsToken {
	in := strconv.FormatInt(int64(t.ExpiresOn.Sub(a.o.Clock()).Seconds()), 10)
	return imdsToken{AccessToken: t.AccessToken, ExpiresIn: in, ExtExpiresIn: in, ExpiresOn: strconv.FormatInt(t.ExpiresOn.Unix(), 10),
		NotBefore: strconv.FormatInt(t.NotBefore.Unix(), 10), Resource: t.Resource, TokenType: "Bearer", ClientID: t.ClientID}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeIMDSError writes IMDS's error shape.
func writeIMDSError(w http.ResponseWriter, status int, code, description string) {
	writeJSON(w, status, map[string]string{"error": code, "error_description": description})
}

// refusal is an answer other than a token: its status, IMDS error code and message.
type refusal struct {
	status  int
	code    string
	message string
}

func (r *refusal) Error() string { return r.message }

// Handler serves the NMI routes. Token requests, answered or refused, are timed under
// upstream's NMI series.
func (a *Agent) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rt, _ := classify(r.URL)
		op := metricOperation(rt)
		if op == "" {
			a.serve(w, r)
			return
		}
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w}
		ns := a.serve(rec, r)
		if rec.status != 0 { // 0: the caller left before an answer
			a.metrics.observeRequest(op, rec.status, ns, r.URL.Query().Get("resource"), time.Since(start))
		}
	})
}

// serve routes one request; it returns the namespace of the pod the request was for, once that
// pod is known.
func (a *Agent) serve(w http.ResponseWriter, r *http.Request) (ns string) {
	ctx := r.Context()
	rt, canon := classify(r.URL)
	host, _, _ := net.SplitHostPort(r.RemoteAddr)
	ip := net.ParseIP(host)
	pod, hostCaller, err := a.caller(ctx, ip)
	// A pod's first request can come before the kubelet has written its address to the
	// pod's status: wait (bounded) for the informer to learn it, as upstream's NMI retries.
	for deadline := a.o.Clock().Add(a.o.PodWait); err == nil && pod == nil && !hostCaller && ip != nil && a.o.Clock().Before(deadline); {
		select {
		case <-ctx.Done():
			return ""
		case <-time.After(100 * time.Millisecond):
		}
		pod, hostCaller, err = a.caller(ctx, ip)
	}
	if err != nil {
		a.log.ErrorContext(ctx, "Looking up the caller failed", "err", err)
		writeIMDSError(w, http.StatusInternalServerError, "internal_error", "The node agent could not look up the caller.")
		return ""
	}
	if pod != nil {
		ns = pod.Namespace
	}
	switch {
	case rt == routeNonCanonical:
		// Refused for every caller: nothing behind the agent gets a chance to normalise it.
		writeIMDSError(w, http.StatusBadRequest, "invalid_request", "The path is not canonical; use the plain /metadata/... path.")
	case hostCaller:
		if rt != routeHostToken {
			writeIMDSError(w, http.StatusForbidden, "forbidden", "Host-network callers may only use /host/token/ with the podname and podns headers.")
			return ""
		}
		ns = a.hostToken(w, r)
	case pod == nil:
		a.log.InfoContext(ctx, "Refused a request from an unknown address", "sourceIP", host, "path", clip(r.URL.Path, 200))
		writeIMDSError(w, http.StatusForbidden, "forbidden",
			fmt.Sprintf("The source address %s is not a pod of node %s.", host, a.o.NodeName))
	case rt == routeHostToken:
		writeIMDSError(w, http.StatusForbidden, "forbidden", "/host/token/ is for host-network callers only.")
	case rt == routeInstance:
		writeIMDSError(w, http.StatusForbidden, "forbidden", "The instance metadata endpoint is blocked for pods.")
	case rt == routeIdentity:
		writeIMDSError(w, http.StatusNotFound, "not_found", "Only /metadata/identity/oauth2/token is served to pods.")
	case rt == routeToken:
		a.podToken(w, withPath(r, canon), pod)
	default:
		a.proxy.ServeHTTP(w, withPath(r, canon))
	}
	return ns
}

// withPath is r with its path replaced by the canonical one: what is forwarded is what was
// routed.
func withPath(r *http.Request, p string) *http.Request {
	out := r.Clone(r.Context())
	out.URL.Path, out.URL.RawPath = p, ""
	return out
}

// caller finds the pod of this node with source address ip; hostCaller is true for the host
// itself and host-network pods.
func (a *Agent) caller(ctx context.Context, ip net.IP) (*corev1.Pod, bool, error) {
	if ip == nil {
		return nil, false, nil
	}
	var pods corev1.PodList
	if err := a.reader.List(ctx, &pods, client.MatchingFields{indexPodIP: ip.String()}); err != nil {
		return nil, false, fmt.Errorf("list pods by address: %w", err)
	}
	hostNetwork := false
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Spec.HostNetwork {
			hostNetwork = true
			continue
		}
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || p.DeletionTimestamp != nil {
			continue
		}
		return p, false, nil
	}
	return nil, hostNetwork || a.local(ip), nil
}

// query holds the request's resource and identity selector.
type query struct {
	resource string
	want     Identity
}

func parseQuery(r *http.Request) (query, *refusal) {
	if !strings.EqualFold(r.Header.Get("Metadata"), "true") {
		return query{}, &refusal{http.StatusBadRequest, "invalid_request", "Required metadata header not specified"}
	}
	q := r.URL.Query()
	out := query{resource: q.Get("resource")}
	if out.resource == "" {
		return query{}, &refusal{http.StatusBadRequest, "invalid_request", "Required query variable 'resource' is missing"}
	}
	out.want.ClientID = q.Get("client_id")
	out.want.ResourceID = q.Get("msi_res_id")
	if out.want.ResourceID == "" {
		out.want.ResourceID = q.Get("mi_res_id")
	}
	if out.want.ClientID != "" && out.want.ResourceID != "" {
		return query{}, &refusal{http.StatusBadRequest, "invalid_request", "Give at most one of client_id, msi_res_id and mi_res_id."}
	}
	return out, nil
}

func (a *Agent) podToken(w http.ResponseWriter, r *http.Request, pod *corev1.Pod) {
	ctx := r.Context()
	q, ref := parseQuery(r)
	if ref != nil {
		writeIMDSError(w, ref.status, ref.code, ref.message)
		return
	}
	exempt, err := a.exempt(ctx, pod)
	if err != nil {
		writeIMDSError(w, http.StatusInternalServerError, "internal_error", "The node agent could not read AzurePodIdentityExceptions.")
		return
	}
	if exempt {
		a.forwardToken(w, r)
		return
	}
	body, clientID, ref := a.issue(ctx, pod, q)
	if ref != nil {
		writeIMDSError(w, ref.status, ref.code, ref.message)
		return
	}
	_ = clientID
	writeJSON(w, http.StatusOK, body)
}

// hostToken serves /host/token/: a host-network helper asks on behalf of the pod named by the
// podname and podns headers; the answer is {token, clientid}. It returns the pod's namespace
// once the pod is found (a header alone names no namespace in the metrics).
func (a *Agent) hostToken(w http.ResponseWriter, r *http.Request) string {
	ctx := r.Context()
	name, ns := r.Header.Get("podname"), r.Header.Get("podns")
	if name == "" || ns == "" {
		writeIMDSError(w, http.StatusBadRequest, "invalid_request", "The podname and podns headers are required.")
		return ""
	}
	resource := r.URL.Query().Get("resource")
	if resource == "" {
		writeIMDSError(w, http.StatusBadRequest, "invalid_request", "Required query variable 'resource' is missing")
		return ""
	}
	var pod corev1.Pod
	if err := a.reader.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &pod); err != nil {
		writeIMDSError(w, http.StatusNotFound, "not_found", fmt.Sprintf("No pod %s/%s on node %s.", ns, name, a.o.NodeName))
		return ""
	}
	body, clientID, ref := a.issue(ctx, &pod, query{resource: resource,
		want: Identity{ClientID: r.URL.Query().Get("client_id"), ResourceID: r.URL.Query().Get("msi_res_id")}})
	if ref != nil {
		writeIMDSError(w, ref.status, ref.code, ref.message)
		return pod.Namespace
	}
	writeJSON(w, http.StatusOK, map[string]any{"token": body, "clientid": clientID})
	return pod.Namespace
}

// forwardToken passes an exception pod's token request to the node's IMDS, with the node's
// identity header where the endpoint needs one.
func (a *Agent) forwardToken(w http.ResponseWriter, r *http.Request) {
	out := r.Clone(r.Context())
	if a.o.IMDSHeader != "" {
		out.Header.Set(IdentityHeaderName, a.o.IMDSHeader)
	}
	a.forward.ServeHTTP(w, out)
}

func (a *Agent) exempt(ctx context.Context, pod *corev1.Pod) (bool, error) {
	var list aadv1.AzurePodIdentityExceptionList
	if err := a.reader.List(ctx, &list, client.InNamespace(pod.Namespace)); err != nil {
		return false, fmt.Errorf("list exceptions: %w", err)
	}
	for _, e := range list.Items {
		if len(e.Spec.PodLabels) == 0 {
			continue
		}
		match := true
		for k, v := range e.Spec.PodLabels {
			if pod.Labels[k] != v {
				match = false
				break
			}
		}
		if match {
			return true, nil
		}
	}
	return false, nil
}

func podRef(p *corev1.Pod) corev1.ObjectReference {
	return corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: p.Namespace, Name: p.Name, UID: p.UID}
}

func bindingRef(b *aadv1.AzureIdentityBinding) corev1.ObjectReference {
	return corev1.ObjectReference{Kind: "AzureIdentityBinding", APIVersion: aadv1.GroupVersion.String(), Namespace: b.Namespace, Name: b.Name, UID: b.UID}
}

// issue finds the identity bound to pod, waiting (bounded) for it to be Assigned, and returns a
// token of it; every answer is audited.
func (a *Agent) issue(ctx context.Context, pod *corev1.Pod, q query) (imdsToken, string, *refusal) {
	m, ref := a.bound(ctx, pod, q.want)
	if ref != nil {
		obj := podRef(pod)
		if m != nil {
			obj = bindingRef(m.Binding)
		}
		a.audit.Record(obj, pod, corev1.EventTypeWarning, ReasonTokenRefused, fmt.Sprintf("Refused a token for resource %s to pod %s/%s: %s",
			clip(q.resource, 200), pod.Namespace, pod.Name, ref.message))
		return imdsToken{}, "", ref
	}
	id := Identity{ClientID: m.Identity.Spec.ClientID, ResourceID: m.Identity.Spec.ResourceID}
	if m.Identity.Spec.Type != aadv1.UserAssignedMSI {
		id = Identity{ClientID: m.Identity.Spec.ClientID, sp: m.Identity}
	}
	t, _, err := a.tokens.Token(ctx, id, q.resource)
	if err != nil {
		ref := &refusal{http.StatusInternalServerError, "internal_error", "The node's managed-identity endpoint could not be reached."}
		if ue, ok := errors.AsType[*UpstreamError](err); ok {
			ref = &refusal{ue.Status, ue.Code, ue.Description}
		} else if se, ok := errors.AsType[*SPError](err); ok {
			ref = &refusal{http.StatusForbidden, "invalid_identity", se.Message}
		} else {
			a.log.ErrorContext(ctx, "Getting a token failed", "pod", pod.Namespace+"/"+pod.Name, "err", err)
		}
		a.audit.Record(bindingRef(m.Binding), pod, corev1.EventTypeWarning, ReasonTokenRefused, fmt.Sprintf("Refused a token for resource %s to pod %s/%s (identity %s): %s",
			clip(q.resource, 200), pod.Namespace, pod.Name, displayID(id), ref.message))
		return imdsToken{}, "", ref
	}
	a.audit.Record(bindingRef(m.Binding), pod, corev1.EventTypeNormal, ReasonTokenIssued, fmt.Sprintf("Issued a token for resource %s to pod %s/%s (identity %s)",
		clip(q.resource, 200), pod.Namespace, pod.Name, displayID(id)))
	b := a.body(t)
	if b.ClientID == "" {
		b.ClientID = id.ClientID
	}
	return b, b.ClientID, nil
}

func displayID(id Identity) string {
	if id.ClientID != "" {
		return id.ClientID
	}
	return id.ResourceID
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// bound returns the binding and identity that give pod its token: one that matches the pod now,
// that the request selects (if it names an identity), and whose AzureAssignedIdentity for the
// pod is Assigned. It waits up to AssignWait for the assignment.
func (a *Agent) bound(ctx context.Context, pod *corev1.Pod, want Identity) (*podidentity.Match, *refusal) {
	deadline := a.o.Clock().Add(a.o.AssignWait)
	for {
		matches, err := a.matches(ctx, pod)
		if err != nil {
			return nil, &refusal{http.StatusInternalServerError, "internal_error", "The node agent could not read the pod's bindings."}
		}
		if len(matches) == 0 {
			return nil, &refusal{http.StatusForbidden, "forbidden", fmt.Sprintf(
				"No AzureIdentityBinding matches pod %s/%s (label %s=%q); bindings match pods of their own namespace unless the AzureIdentity's %s annotation allows others.",
				pod.Namespace, pod.Name, aadv1.PodLabel, pod.Labels[aadv1.PodLabel], aadv1.AllowedNamespacesAnnotation)}
		}
		var selected []podidentity.Match
		for _, m := range matches {
			if want.ClientID == "" && want.ResourceID == "" ||
				want.ClientID != "" && strings.EqualFold(want.ClientID, m.Identity.Spec.ClientID) ||
				want.ResourceID != "" && strings.EqualFold(want.ResourceID, m.Identity.Spec.ResourceID) {
				selected = append(selected, m)
			}
		}
		if len(selected) == 0 {
			return &matches[0], &refusal{http.StatusForbidden, "forbidden", fmt.Sprintf("The requested identity %s is not bound to pod %s/%s.",
				clip(displayID(want), 200), pod.Namespace, pod.Name)}
		}
		var assigned aadv1.AzureAssignedIdentityList
		if err := a.reader.List(ctx, &assigned, client.MatchingFields{indexAssignedPod: pod.Namespace + "/" + pod.Name}); err != nil {
			return nil, &refusal{http.StatusInternalServerError, "internal_error", "The node agent could not read the pod's assigned identities."}
		}
		for _, m := range selected {
			for _, ai := range assigned.Items {
				if ai.Status.Status == aadv1.AssignedIDAssigned && ai.Spec.NodeName == a.o.NodeName && ai.Spec.AzureBindingRef != nil &&
					ai.Spec.AzureBindingRef.Name == m.Binding.Name && ai.Spec.AzureBindingRef.Namespace == m.Binding.Namespace {
					return &m, nil
				}
			}
		}
		if !a.o.Clock().Before(deadline) {
			return &selected[0], &refusal{http.StatusNotFound, "identity_not_assigned", fmt.Sprintf(
				"The identity bound to pod %s/%s is not assigned to node %s yet; retry later.", pod.Namespace, pod.Name, a.o.NodeName)}
		}
		select {
		case <-ctx.Done():
			return &selected[0], &refusal{http.StatusServiceUnavailable, "canceled", "The request ended before the identity was assigned."}
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (a *Agent) matches(ctx context.Context, pod *corev1.Pod) ([]podidentity.Match, error) {
	if pod.Labels[aadv1.PodLabel] == "" {
		return nil, nil
	}
	var bindings aadv1.AzureIdentityBindingList
	if err := a.reader.List(ctx, &bindings); err != nil {
		return nil, fmt.Errorf("list bindings: %w", err)
	}
	var ids aadv1.AzureIdentityList
	if err := a.reader.List(ctx, &ids); err != nil {
		return nil, fmt.Errorf("list identities: %w", err)
	}
	return podidentity.Matches(pod, bindings.Items, ids.Items), nil
}

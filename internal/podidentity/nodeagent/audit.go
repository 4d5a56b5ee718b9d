package nodeagent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Event reasons the node agent records.
const (
	ReasonTokenIssued  = "TokenIssued"
	ReasonTokenRefused = "TokenRefused"
)

// auditKey identifies one aggregated Event: the same object, type, reason and pod. The message
// (which names the resource) is not part of it, so a pod asking for ever new resources still
// makes one Event, carrying the latest message.
type auditKey struct {
	obj       corev1.ObjectReference
	pod       string
	eventType string
	reason    string
}

type auditCount struct {
	n           int32
	first, last time.Time
	message     string
}

// maxAuditKeys bounds what one flush interval holds; records beyond it are dropped (and logged
// as a count) rather than growing without bound.
const maxAuditKeys = 10000

// Auditor records issuances and refusals as Events, aggregated: records with the same key
// between two flushes add to one Event's count, and later flushes add to the same Event.
// Messages never contain a token.
type Auditor struct {
	c       client.Client
	node    string
	now     func() time.Time
	mu      sync.Mutex
	queue   map[auditKey]*auditCount
	dropped int
}

func newAuditor(c client.Client, node string, now func() time.Time) *Auditor {
	return &Auditor{c: c, node: node, now: now, queue: map[auditKey]*auditCount{}}
}

// Record counts one occurrence for pod.
func (a *Auditor) Record(obj corev1.ObjectReference, pod *corev1.Pod, eventType, reason, message string) {
	k := auditKey{obj: obj, pod: pod.Namespace + "/" + pod.Name, eventType: eventType, reason: reason}
	now := a.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	if c := a.queue[k]; c != nil {
		c.n++
		c.last, c.message = now, message
		return
	}
	if len(a.queue) >= maxAuditKeys {
		a.dropped++
		return
	}
	a.queue[k] = &auditCount{n: 1, first: now, last: now, message: message}
}

// Flush writes what was recorded since the last flush.
func (a *Auditor) Flush(ctx context.Context) error {
	a.mu.Lock()
	q := a.queue
	a.queue = map[auditKey]*auditCount{}
	dropped := a.dropped
	a.dropped = 0
	a.mu.Unlock()
	var firstErr error
	if dropped > 0 {
		firstErr = fmt.Errorf("write audit events: %d records dropped over the limit of %d keys", dropped, maxAuditKeys)
	}
	for k, c := range q {
		if err := a.write(ctx, k, c); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return firstErr
}

func (a *Auditor) write(ctx context.Context, k auditKey, c *auditCount) error {
	sum := sha256.Sum256([]byte(a.node + "\x00" + string(k.obj.UID) + "\x00" + k.pod + "\x00" + k.eventType + "\x00" + k.reason))
	name := fmt.Sprintf("%.200s.%s", k.obj.Name, hex.EncodeToString(sum[:8]))
	var ev corev1.Event
	err := a.c.Get(ctx, types.NamespacedName{Namespace: k.obj.Namespace, Name: name}, &ev)
	switch {
	case apierrors.IsNotFound(err):
		ev = corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Namespace: k.obj.Namespace, Name: name},
			InvolvedObject: k.obj, Type: k.eventType, Reason: k.reason, Message: c.message, Count: c.n,
			FirstTimestamp: metav1.NewTime(c.first), LastTimestamp: metav1.NewTime(c.last),
			Source:              corev1.EventSource{Component: "cerulean-node-agent", Host: a.node},
			ReportingController: "cerulean.dev/node-agent", ReportingInstance: a.node,
		}
		if err := a.c.Create(ctx, &ev); err != nil {
			return fmt.Errorf("create event: %w", err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("get event: %w", err)
	}
	patch := client.MergeFrom(ev.DeepCopy())
	ev.Count += c.n
	ev.Message = c.message
	ev.LastTimestamp = metav1.NewTime(c.last)
	if err := a.c.Patch(ctx, &ev, patch); err != nil {
		return fmt.Errorf("update event: %w", err)
	}
	return nil
}

package podidentity

import (
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cerulean/cerulean/internal/controller/record"
)

// NewReconciler is the controller without a manager, for tests that choose what its reads see.
func NewReconciler(c client.Client, rec events.EventRecorder, opts Options) *Reconciler {
	return &Reconciler{c: c, rec: record.New(rec), opts: opts}
}

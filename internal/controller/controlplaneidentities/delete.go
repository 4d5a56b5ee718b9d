package controlplaneidentities

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	secretsstorev1 "sigs.k8s.io/secrets-store-csi-driver/apis/v1"

	cpv1 "github.com/cerulean/cerulean/api/cerulean/v1alpha1"
	keyvaultv1 "github.com/cerulean/cerulean/api/keyvault/v1api20230701"
	"github.com/cerulean/cerulean/internal/controller/credentials"
	"github.com/cerulean/cerulean/internal/controller/lifecycle"
	"github.com/cerulean/cerulean/internal/controller/patch"
)

// delete removes what the object created: each component's Key Vault secret (deleted; in a
// vault with soft delete it stays recoverable for the vault's retention) and SecretProviderClass.
// The identities, and the certificates registered on them (valid until they expire), stay.
func (r *Reconciler) delete(ctx context.Context, obj *cpv1.ControlPlaneIdentities) error {
	if !controllerutil.ContainsFinalizer(obj, Finalizer) {
		return nil
	}
	crdGone, err := lifecycle.CRDDeleting(ctx, r.crdReader(), r.c.RESTMapper(), cpv1.GroupVersion.WithKind("ControlPlaneIdentities"))
	if err != nil {
		return err
	}
	if crdGone {
		// An uninstall: the Key Vault secrets stay (components keep running); the
		// SecretProviderClasses go with their owner by garbage collection.
		log.FromContext(ctx).Info("Detaching: the CRD is being deleted; the Key Vault secrets are kept")
		r.opts.Recorder.Eventf(obj, nil, corev1.EventTypeNormal, "Detached", "Delete", "The CRD is being deleted: the Key Vault secrets were kept")
		return r.releaseFinalizer(ctx, obj)
	}
	cred, err := r.opts.Credentials.For(ctx, obj)
	if err != nil {
		return fmt.Errorf("resolve the Azure credential: %w", err)
	}
	if r.vaultGone(ctx, obj, cred) {
		// Its secrets went with it: nothing to delete there.
		r.opts.Recorder.Eventf(obj, nil, corev1.EventTypeNormal, cpv1.ReasonDeleting, "Delete", "The vault is gone; only the SecretProviderClasses are deleted")
		cred = nil
	}
	for i := range obj.Status.Components {
		if err := r.removeComponent(ctx, obj, cred, &obj.Status.Components[i]); err != nil {
			r.opts.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, cpv1.ReasonDeleting, "Delete", "%s: %v", obj.Status.Components[i].Name, err)
			return err
		}
	}
	return r.releaseFinalizer(ctx, obj)
}

// releaseFinalizer lets Kubernetes delete the object, forgetting what it left pending.
func (r *Reconciler) releaseFinalizer(ctx context.Context, obj *cpv1.ControlPlaneIdentities) error {
	r.forgetPending(string(obj.UID))
	ph, err := patch.New(r.c, obj)
	if err != nil {
		return err
	}
	controllerutil.RemoveFinalizer(obj, Finalizer)
	if err := ph.Patch(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove finalizer: %w", err)
	}
	return nil
}

// crdReader reads the CRD without the cache when it can.
func (r *Reconciler) crdReader() client.Reader {
	if r.opts.APIReader != nil {
		return r.opts.APIReader
	}
	return r.c
}

// vaultGone reports whether the object's vault no longer exists: its ASO object is gone, or ARM
// answers 404.
func (r *Reconciler) vaultGone(ctx context.Context, obj *cpv1.ControlPlaneIdentities, cred *credentials.Credential) bool {
	id, err := r.refID(ctx, obj.Namespace, obj.Spec.KeyVault, &keyvaultv1.Vault{}, "keyVault")
	var ce *condError
	if errors.As(err, &ce) && ce.reason == cpv1.ReasonReferenceNotFound {
		return true
	}
	if err != nil {
		return false
	}
	_, err = r.opts.Azure.Vault(ctx, cred.Cached(), id)
	return isStatus(err, http.StatusNotFound)
}

// removeComponent deletes one component's secret (when cred is set) and SecretProviderClass.
func (r *Reconciler) removeComponent(ctx context.Context, obj *cpv1.ControlPlaneIdentities, cred *credentials.Credential, st *cpv1.ComponentStatus) error {
	if st.VaultURI != "" && st.SecretName != "" && cred != nil {
		fresh, err := cred.Fresh(ctx)
		if err != nil {
			return fmt.Errorf("build the Azure credential: %w", err)
		}
		if err := r.opts.Azure.DeleteSecret(ctx, fresh, st.VaultURI, st.SecretName); err != nil {
			return err
		}
		r.opts.Recorder.Eventf(obj, nil, corev1.EventTypeNormal, EventSecretDeleted, "Delete", "%s: secret %s deleted from %s", st.Name, st.SecretName, st.VaultURI)
	}
	spc := &secretsstorev1.SecretProviderClass{}
	err := r.c.Get(ctx, types.NamespacedName{Namespace: obj.Namespace, Name: string(st.Name)}, spc)
	switch {
	case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
		return nil
	case err != nil:
		return fmt.Errorf("read SecretProviderClass %s: %w", st.Name, err)
	}
	if !metav1.IsControlledBy(spc, obj) {
		return nil
	}
	if err := r.c.Delete(ctx, spc); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete SecretProviderClass %s: %w", st.Name, err)
	}
	return nil
}

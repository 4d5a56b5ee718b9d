package manager_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/msi/armmsi"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	aadv1 "github.com/cerulean/cerulean/api/aadpodidentity/v1"
	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
)

// The manager runs pod identity's assignment controller with its global credential: a pod
// selected by a binding gets its identity on the node's scale set.
func TestManagerAssignsPodIdentities(t *testing.T) {
	c := kube(t)
	ctx := t.Context()
	az := cloudtest.Start(t, cloud.Options{ARM: cloudtest.FastARM()})
	s := az.Settings()
	cred, opts := cloudtest.OwnerCred(t, az), cloudtest.ARMOptions(az)
	cloudtest.CreateGroup(t, az, cred, opts, "westeurope", "rg")
	mis, err := armmsi.NewUserAssignedIdentitiesClient(s.SubscriptionID, cred, opts)
	if err != nil {
		t.Fatal(err)
	}
	mi, err := mis.CreateOrUpdate(ctx, "rg", "id-app", armmsi.Identity{Location: to.Ptr("westeurope")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	sss, err := armcompute.NewVirtualMachineScaleSetsClient(s.SubscriptionID, cred, opts)
	if err != nil {
		t.Fatal(err)
	}
	p, err := sss.BeginCreateOrUpdate(ctx, "rg", "pool", armcompute.VirtualMachineScaleSet{Location: to.Ptr("westeurope")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ss, err := p.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ns := namespace(t, c)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "pi-" + ns}, Spec: corev1.NodeSpec{ProviderID: "azure://" + *ss.ID + "/virtualMachines/0"}}
	for _, o := range []client.Object{node,
		&aadv1.AzureIdentity{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "id-app"}, Spec: aadv1.AzureIdentitySpec{ResourceID: *mi.ID, ClientID: *mi.Properties.ClientID}},
		&aadv1.AzureIdentityBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "id-app"}, Spec: aadv1.AzureIdentityBindingSpec{AzureIdentity: "id-app", Selector: "app"}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web", Labels: map[string]string{aadv1.PodLabel: "app"}},
			Spec: corev1.PodSpec{NodeName: node.Name, Containers: []corev1.Container{{Name: "app", Image: "app"}}}},
	} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = c.Delete(t.Context(), node) })
	startManager(t, az, time.Hour, ns)
	eventually(t, time.Minute, "the identity Assigned", func() (bool, string) {
		var a aadv1.AzureAssignedIdentity
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web-" + ns + "-id-app"}, &a); err != nil {
			return false, err.Error()
		}
		return a.Status.Status == aadv1.AssignedIDAssigned, fmt.Sprintf("%+v", a.Status)
	})
	got, err := sss.Get(ctx, "rg", "pool", nil)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	if got.Identity != nil {
		for id := range got.Identity.UserAssignedIdentities {
			found = found || strings.EqualFold(id, *mi.ID)
		}
	}
	if !found {
		t.Fatalf("the scale set lacks the identity: %+v", got.Identity)
	}
}

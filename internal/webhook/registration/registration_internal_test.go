package registration

import (
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
)

// A webhook keeps its own bundle; one new to the configuration gets its siblings' (the CA
// injector has not seen it yet, and without a bundle kube-apiserver could not call it).
func TestKeepBundles(t *testing.T) {
	hook := func(name, ca string) admissionregistrationv1.ValidatingWebhook {
		return admissionregistrationv1.ValidatingWebhook{Name: name, ClientConfig: admissionregistrationv1.WebhookClientConfig{CABundle: []byte(ca)}}
	}
	got := []admissionregistrationv1.ValidatingWebhook{hook("a", "ca-a"), hook("b", "ca-b")}
	want := []admissionregistrationv1.ValidatingWebhook{hook("b", ""), hook("new", ""), hook("a", "")}
	keepBundles(got, want, func(h *admissionregistrationv1.ValidatingWebhook) (string, *[]byte) {
		return h.Name, &h.ClientConfig.CABundle
	})
	for i, ca := range []string{"ca-b", "ca-a", "ca-a"} {
		if string(want[i].ClientConfig.CABundle) != ca {
			t.Errorf("%s: bundle %q, want %q", want[i].Name, want[i].ClientConfig.CABundle, ca)
		}
	}
}

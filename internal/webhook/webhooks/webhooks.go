// Package webhooks puts the manager's admission webhooks together: the webhook server with
// certificates from internal/webhook/certs, the workload identity handler, pod identity's
// admission check (internal/webhook/podidentity), and the registration
// (by URL on loopback under `cerulean-local up`, through a Service in a cluster).
//
// The manager calls it in two steps, because the server's TLS must exist when the manager is
// created:
//
//	w, err := webhooks.New(restConfig, opts)
//	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{WebhookServer: w.Server(), ...})
//	err = w.Setup(ctx, mgr)
package webhooks

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/cerulean/cerulean/internal/webhook/armgrants"
	"github.com/cerulean/cerulean/internal/webhook/certs"
	"github.com/cerulean/cerulean/internal/webhook/podidentity"
	"github.com/cerulean/cerulean/internal/webhook/registration"
	"github.com/cerulean/cerulean/internal/webhook/workloadidentity"
)

// The manager registers its webhook configurations, keeps their CA bundle current, shares its CA
// through a Secret, and reads the service accounts of the pods it mutates.
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations;validatingwebhookconfigurations,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups="",resources=serviceaccounts,verbs=get;list;watch

// Options configure the webhooks.
type Options struct {
	// Namespace holds the CA Secret (the manager's namespace).
	Namespace string
	// Host and Port are where the server listens; under `cerulean-local up` Host is 127.0.0.1.
	Host string
	Port int
	// Service, when set, is how kube-apiserver reaches the server in a cluster; the serving
	// certificate names it. When nil, the webhook is registered by URL at https://Host:Port.
	Service *admissionregistrationv1.ServiceReference
	// WorkloadIdentity are the mutation's defaults (tenant, authority host).
	WorkloadIdentity workloadidentity.Config
	// NoPodIdentity leaves pod identity's admission check out (pod identity is off).
	NoPodIdentity bool
	// AllowUngrantedIdentities and AllowUngrantedScopes turn the NamespaceGrant checks off
	// (upstream's and Azure Service Operator's behaviour); the ARM kinds' check stays
	// registered for their export expressions.
	AllowUngrantedIdentities, AllowUngrantedScopes bool
	// Certs tunes the certificates (validity, clock); Namespace, names and configurations are
	// filled in here.
	Certs certs.Options
}

// Webhooks is the manager's webhook server and what it needs.
type Webhooks struct {
	opts    Options
	c       client.Client
	rotator *certs.Rotator
	server  webhook.Server
}

// New prepares the server and its certificates; nothing is written to the cluster yet.
func New(cfg *rest.Config, opts Options) (*Webhooks, error) {
	if opts.Port == 0 {
		return nil, errors.New("webhooks: no port")
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return nil, fmt.Errorf("create webhook client: %w", err)
	}
	co := opts.Certs
	co.Namespace = opts.Namespace
	co.MutatingWebhooks = []string{workloadidentity.ConfigurationName}
	if !opts.NoPodIdentity {
		co.ValidatingWebhooks = []string{podidentity.ConfigurationName}
	}
	co.ValidatingWebhooks = append(co.ValidatingWebhooks, armgrants.ConfigurationName)
	if opts.Service != nil {
		s := opts.Service
		co.DNSNames = []string{s.Name + "." + s.Namespace + ".svc", s.Name + "." + s.Namespace + ".svc.cluster.local"}
	} else {
		ip := net.ParseIP(opts.Host)
		if ip == nil {
			return nil, fmt.Errorf("webhooks: host %q is not an IP address to register by URL", opts.Host)
		}
		co.IPAddresses = []net.IP{ip}
	}
	r, err := certs.New(c, co)
	if err != nil {
		return nil, err
	}
	srv := webhook.NewServer(webhook.Options{Host: opts.Host, Port: opts.Port, TLSOpts: []func(*tls.Config){r.TLSOpt, http1Only}})
	return &Webhooks{opts: opts, c: c, rotator: r, server: srv}, nil
}

// http1Only turns HTTP/2 off, as Kubebuilder's projects do by default: HTTP/2's rapid reset
// (CVE-2023-44487) reaches the server otherwise, and over HTTP/1.1 with keep-alive each admission
// costs the server less (no goroutine per request and per frame written; see docs/benchmarks.md).
func http1Only(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }

// Server is the webhook server to give ctrl.Options.WebhookServer.
func (w *Webhooks) Server() webhook.Server { return w.server }

// Rotator keeps the certificates.
func (w *Webhooks) Rotator() *certs.Rotator { return w.rotator }

// Setup issues the certificates, registers the handlers and the configuration, and adds the
// rotator to the manager. It returns once kube-apiserver has a CA bundle that trusts the server.
func (w *Webhooks) Setup(ctx context.Context, mgr ctrl.Manager) error {
	if err := w.rotator.Ensure(ctx); err != nil {
		return err
	}
	cc := registration.ClientConfig{CABundle: w.rotator.CABundle()}
	if w.opts.Service != nil {
		cc.Service = w.opts.Service
	} else {
		cc.URL = fmt.Sprintf("https://%s", net.JoinHostPort(w.opts.Host, fmt.Sprint(w.opts.Port)))
	}
	if err := workloadidentity.Apply(ctx, w.c, cc); err != nil {
		return err
	}
	if err := workloadidentity.Setup(mgr, w.opts.WorkloadIdentity); err != nil {
		return err
	}
	if !w.opts.NoPodIdentity {
		if err := podidentity.Apply(ctx, w.c, cc); err != nil {
			return err
		}
		podidentity.Setup(mgr, w.opts.AllowUngrantedIdentities)
	}
	// Registered with the scope checks off too: it still refuses expressions that do not compile.
	if err := armgrants.Apply(ctx, w.c, cc); err != nil {
		return err
	}
	armgrants.Setup(mgr, w.opts.AllowUngrantedScopes)
	if err := mgr.Add(w.rotator); err != nil {
		return fmt.Errorf("add webhook certificate rotator: %w", err)
	}
	return nil
}

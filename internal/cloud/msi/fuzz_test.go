package msi

import (
	"errors"
	"net/http"
	"strings"
	"testing"
)

// FuzzParseTokenQuery feeds the token endpoints' query parser untrusted input: it must never
// panic, must fail only with a 400 *Error, and what it accepts must be self-consistent.
func FuzzParseTokenQuery(f *testing.F) {
	for _, seed := range []string{
		"api-version=2018-02-01&resource=https%3A%2F%2Fmanagement.azure.com%2F",
		"api-version=2019-08-01&resource=https://vault.azure.net&client_id=7c8e5a4b-1f2d-4e3a-9b6c-0d1e2f3a4b5c",
		"api-version=2018-02-01&resource=api://app&object_id=7c8e5a4b-1f2d-4e3a-9b6c-0d1e2f3a4b5c",
		"api-version=2018-02-01&resource=R&msi_res_id=%2Fsubscriptions%2Fs%2FresourceGroups%2Frg%2Fproviders%2FMicrosoft.ManagedIdentity%2FuserAssignedIdentities%2Fid",
		"api-version=2018-02-01&resource=7c8e5a4b-1f2d-4e3a-9b6c-0d1e2f3a4b5c&mi_res_id=/subscriptions/s/resourceGroups/rg/providers/Microsoft.ManagedIdentity/userAssignedIdentities/id",
		"api-version=2018-02-01&api-version=2018-02-01&resource=x",
		"api-version=2018-02-01&resource=https://vault.azure.net/.default",
		"api-version=9999-99-99&resource=https://a&client_id=x&object_id=y",
		"resource=%zz",
		"a;b=c",
		"",
	} {
		f.Add(seed, false)
		f.Add(seed, true)
	}
	f.Fuzz(func(t *testing.T, raw string, appService bool) {
		style := IMDS
		if appService {
			style = AppService
		}
		q, err := ParseTokenQuery(raw, style)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Status != http.StatusBadRequest || e.Code == "" || e.Message == "" {
				t.Fatalf("error %v is not a 400 *Error", err)
			}
			return
		}
		if q.Resource == "" || q.APIVersion == "" || strings.HasSuffix(q.Resource, "/.default") {
			t.Fatalf("accepted %+v", q)
		}
		if (q.By == ByDefault) != (q.Value == "") {
			t.Fatalf("selector %q with value %q", q.By, q.Value)
		}
		if style == AppService && q.APIVersion != AppServiceAPIVersion {
			t.Fatalf("app service version %q", q.APIVersion)
		}
	})
}

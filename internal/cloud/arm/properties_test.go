package arm

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"sync"
	"testing"

	"github.com/cerulean/cerulean/internal/cloud/arm/armid"
	"github.com/cerulean/cerulean/internal/cloud/store"
)

type counted struct {
	ProvisioningState string `json:"provisioningState"`
	Count             int    `json:"count"`
}

func propsStore(t *testing.T, props string) (*store.Store, armid.ID) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	const raw = "/subscriptions/0b1f6471-1bf0-4dda-aec3-cb9272f09590/resourceGroups/rg/providers/Microsoft.Cache/redis/app"
	id, err := armid.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	if props != "" {
		err = st.Update(ctx, func(tx *store.Tx) error {
			return PutTx(tx, Resource{ID: raw, Name: "app", Type: "Microsoft.Cache/redis", Tags: map[string]string{"a": "b"}, Properties: []byte(props)})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return st, id
}

func stored(t *testing.T, st *store.Store, id armid.ID) Resource {
	t.Helper()
	var r Resource
	if err := st.View(context.Background(), func(tx *store.Tx) (err error) { r, err = GetTx(tx, id); return err }); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestUpdatePropertiesWritesTheEdit: the edit's properties and tags are stored and returned;
// the rest of the resource is kept.
func TestUpdatePropertiesWritesTheEdit(t *testing.T) {
	st, id := propsStore(t, `{"provisioningState":"Creating","count":1}`)
	got, err := UpdateProperties(context.Background(), st, id, func(res *Resource, p *counted) error {
		p.ProvisioningState, p.Count = StateSucceeded, p.Count+1
		res.Tags = map[string]string{"c": "d"}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	r := stored(t, st, id)
	if want := `{"provisioningState":"Succeeded","count":2}`; string(r.Properties) != want || string(got.Properties) != want {
		t.Errorf("properties: stored %s, returned %s, want %s", r.Properties, got.Properties, want)
	}
	if r.Tags["c"] != "d" || r.Name != "app" {
		t.Errorf("stored %+v, want the edit's tags and the rest as before", r)
	}
}

// TestUpdatePropertiesMissingResource: a missing resource is ARM's 404 for it, and nothing is
// written.
func TestUpdatePropertiesMissingResource(t *testing.T) {
	st, id := propsStore(t, "")
	called := false
	_, err := UpdateProperties(context.Background(), st, id, func(*Resource, *counted) error { called = true; return nil })
	var e *Error
	if !errors.As(err, &e) || e.Status != http.StatusNotFound || e.Code != "ResourceNotFound" {
		t.Fatalf("err = %v, want ARM's ResourceNotFound", err)
	}
	if called {
		t.Error("edit called for a missing resource")
	}
}

// TestUpdatePropertiesDecodeError: properties that do not decode into T are an error naming the
// resource, the edit is not called and the stored value is kept.
func TestUpdatePropertiesDecodeError(t *testing.T) {
	st, id := propsStore(t, `{"count":"many"}`)
	called := false
	_, err := UpdateProperties(context.Background(), st, id, func(*Resource, *counted) error { called = true; return nil })
	if err == nil || called {
		t.Fatalf("err = %v, edit called = %v; want a decode error before the edit", err, called)
	}
	if r := stored(t, st, id); string(r.Properties) != `{"count":"many"}` {
		t.Errorf("stored %s, want it unchanged", r.Properties)
	}
}

// TestUpdatePropertiesEditError: an edit's error is returned as is and nothing is written;
// ErrUnchanged is success without a write.
func TestUpdatePropertiesEditError(t *testing.T) {
	st, id := propsStore(t, `{"provisioningState":"Deleting","count":1}`)
	conflict := Errorf(http.StatusConflict, "Conflict", "busy")
	_, err := UpdateProperties(context.Background(), st, id, func(_ *Resource, p *counted) error { p.Count = 9; return conflict })
	if !errors.Is(err, conflict) {
		t.Fatalf("err = %v, want the edit's", err)
	}
	got, err := UpdateProperties(context.Background(), st, id, func(_ *Resource, p *counted) error { p.Count = 9; return ErrUnchanged })
	if err != nil {
		t.Fatal(err)
	}
	if r := stored(t, st, id); string(r.Properties) != `{"provisioningState":"Deleting","count":1}` || string(got.Properties) != string(r.Properties) {
		t.Errorf("stored %s, returned %s, want both unchanged", r.Properties, got.Properties)
	}
}

// TestUpdatePropertiesConcurrent: concurrent edits of one resource each see the other's
// writes; none is lost.
func TestUpdatePropertiesConcurrent(t *testing.T) {
	st, id := propsStore(t, `{"count":0}`)
	const workers, each = 4, 25
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for range workers {
		wg.Go(func() {
			for range each {
				_, err := UpdateProperties(context.Background(), st, id, func(_ *Resource, p *counted) error { p.Count++; return nil })
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if r := stored(t, st, id); string(r.Properties) != `{"provisioningState":"","count":100}` {
		t.Errorf("stored %s, want count 100", r.Properties)
	}
}

// TestUpdatePropertiesNoneStored: a resource stored without properties is edited from T's zero
// value (a map here, as BeginDelete uses it).
func TestUpdatePropertiesNoneStored(t *testing.T) {
	st, id := propsStore(t, "")
	err := st.Update(context.Background(), func(tx *store.Tx) error {
		return PutTx(tx, Resource{ID: id.String(), Name: "app", Type: "Microsoft.Cache/redis"})
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = UpdateProperties(context.Background(), st, id, func(_ *Resource, p *map[string]any) error {
		if *p == nil {
			*p = map[string]any{}
		}
		(*p)["provisioningState"] = StateDeleting
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if r := stored(t, st, id); string(r.Properties) != `{"provisioningState":"Deleting"}` {
		t.Errorf("stored %s", r.Properties)
	}
}

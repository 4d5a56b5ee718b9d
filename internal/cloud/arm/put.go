package arm

import (
	"context"
	"errors"
	"net/http"

	"github.com/cerulean/cerulean/internal/cloud/httpx"
	"github.com/cerulean/cerulean/internal/cloud/store"
)

// Put is the one PUT skeleton every provider fills in. ARM's create-or-update of a resource is
// the same steps whatever the type: the id's placement, the provider's name rule, the body
// (decoded once, with the envelope's location and tags checked by ARM's rules), the provider's
// own body checks, then one write transaction that checks the resource group (and, for a child,
// its parent), reads what is stored, refuses a move to another location, lets the provider fill
// in the resource and stores it. The answer is 201 on create, 200 on update, with the
// provider's view. B is the provider's body type; it is decoded from the whole request body,
// so it may (but need not) carry "location" and "tags" fields of its own.
type Put[B any] struct {
	Type  string // the resource type, for the placement error
	Depth int    // the number of id segments where the type lives: 3 = directly in a resource group
	// Name checks the resource's name (the last segment) and returns the 400 when it is out of
	// the type's bounds; nil accepts any name.
	Name func(name string) error
	// Child marks a resource without location or tags (a database, a firewall rule): its
	// parent must exist (404 ParentResourceNotFound), the envelope is not checked.
	Child bool
	// Check validates the decoded body before the transaction (ARM 400s); it may also prepare
	// what the transaction needs from outside the store.
	Check func(ctx context.Context, r *Request, b *B) error
	// Apply fills in res in the write transaction: its properties, and anything else the
	// provider stores with it. On create res holds only id, name, type, location and tags;
	// on update the stored resource with the body's location and tags already applied.
	Apply func(tx *store.Tx, res *Resource, created bool, b *B) error
	// CreatedStatus is the status of a create (0 = 201; Storage answers 200).
	CreatedStatus int
	// View renders the stored resource as the answer's body.
	View func(Resource) any
}

// Envelope is the part of a tracked resource's PUT body ARM itself checks.
type Envelope struct {
	Location string            `json:"location"`
	Tags     map[string]string `json:"tags"`
}

// PutResult is what a PUT stored.
type PutResult struct {
	Resource Resource
	Created  bool
}

// Response is the PUT's answer: 201 (or CreatedStatus) on create, 200 on update.
func (p Put[B]) Response(res PutResult) httpx.Response {
	status := http.StatusOK
	if res.Created {
		status = http.StatusCreated
		if p.CreatedStatus != 0 {
			status = p.CreatedStatus
		}
	}
	return httpx.Response{Status: status, Body: p.View(res.Resource)}
}

// Serve runs the skeleton and answers with the view.
func (p Put[B]) Serve(ctx context.Context, r *Request) (httpx.Response, error) {
	res, _, err := p.Run(ctx, r)
	if err != nil {
		return httpx.Response{}, err
	}
	return p.Response(res), nil
}

// Run runs the skeleton and returns what it stored and the decoded body, for providers that
// start work after the commit (an engine, a long-running operation).
func (p Put[B]) Run(ctx context.Context, r *Request) (PutResult, *B, error) {
	var out PutResult
	if r.ID.ResourceGroup() == "" || len(r.ID.Segments) != p.Depth {
		return out, nil, Errorf(http.StatusNotFound, "InvalidResourceType", "The resource type '%s' cannot be used at this scope.", p.Type)
	}
	name := r.ID.Name()
	if p.Name != nil {
		if err := p.Name(name); err != nil {
			return out, nil, err
		}
	}
	raw, err := r.body()
	if err != nil {
		return out, nil, err
	}
	var env Envelope
	b := new(B)
	if err := DecodeJSON(raw, &env); err != nil {
		return out, nil, err
	}
	if err := DecodeJSON(raw, b); err != nil {
		return out, nil, err
	}
	if !p.Child {
		if err := CheckLocation(env.Location); err != nil {
			return out, nil, err
		}
		if err := ValidateTags(env.Tags); err != nil {
			return out, nil, err
		}
	}
	if p.Check != nil {
		if err := p.Check(ctx, r, b); err != nil {
			return out, nil, err
		}
	}
	loc := NormalizeLocation(env.Location)
	err = r.svc.Store().Update(ctx, func(tx *store.Tx) error {
		if err := CheckGroupTx(tx, r.ID); err != nil {
			return err
		}
		if p.Child {
			if _, err := GetTx(tx, r.ID.Parent()); IsNotFound(err) {
				parent := r.ID.Parent()
				return Errorf(http.StatusNotFound, "ParentResourceNotFound",
					"Can not perform requested operation on nested resource. Parent resource '%s' not found.", parent.Name())
			} else if err != nil {
				return err
			}
		}
		cur, err := GetTx(tx, r.ID)
		switch {
		case err == nil:
			if !p.Child && cur.Location != loc {
				return Errorf(http.StatusConflict, "InvalidResourceLocation",
					"The resource '%s' already exists in location '%s' in resource group '%s'. A resource with the same name cannot be created in location '%s'.",
					cur.Name, cur.Location, r.ID.ResourceGroup(), loc)
			}
		case IsNotFound(err):
			out.Created = true
			cur = Resource{ID: r.ID.String(), Name: name, Type: r.ID.ResourceType(), Location: loc}
		default:
			return err
		}
		if !p.Child {
			cur.Tags = env.Tags
		}
		if err := p.Apply(tx, &cur, out.Created, b); err != nil {
			return err
		}
		out.Resource = cur
		return PutTx(tx, cur)
	})
	if err != nil {
		return PutResult{}, nil, err
	}
	return out, b, nil
}

// body reads the request body under the configured cap, with Decode's errors.
func (r *Request) body() ([]byte, error) {
	body, err := httpx.ReadBody(r.HTTP, r.svc.o.Config.MaxBody)
	if errors.Is(err, httpx.ErrTooLarge) {
		return nil, Errorf(http.StatusBadRequest, "RequestContentTooLarge", "The request content size exceeds the maximum size of %d bytes.", r.svc.o.Config.MaxBody)
	} else if err != nil {
		return nil, Errorf(http.StatusBadRequest, "InvalidRequestContent", "The request content could not be read.")
	}
	return body, nil
}

package arm

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/cerulean/cerulean/internal/cloud/arm/armid"
	"github.com/cerulean/cerulean/internal/cloud/httpx"
	"github.com/cerulean/cerulean/internal/cloud/store"
)

// Long-running operations: a handler stores an Operation in the same transaction as the change
// that starts it and answers 202 with Azure-AsyncOperation and Location; the work runs in the
// background; both URLs are polled with a short Retry-After. Operations are durable: one that a
// stop or crash interrupted runs again (its work is idempotent) at the next Start.

const bucketOperations = "arm.operations"

// Operation statuses, as the Azure-AsyncOperation body reports them.
const (
	OpInProgress = "InProgress"
	OpSucceeded  = "Succeeded"
	OpFailed     = "Failed"
	OpCanceled   = "Canceled"
)

// Operation kinds.
const opDelete = "delete" // delete Target and everything it holds

// Operation is a stored long-running operation.
type Operation struct {
	ID         string    `json:"id"`
	Kind       string    `json:"kind"`
	Target     string    `json:"target"` // the resource id it acts on
	Status     string    `json:"status"`
	APIVersion string    `json:"apiVersion"`
	Initiator  string    `json:"initiator"` // object id of the caller that started it
	Started    time.Time `json:"startTime"`
	Ended      time.Time `json:"endTime,omitzero"`
	ErrCode    string    `json:"errorCode,omitempty"`
	ErrMessage string    `json:"errorMessage,omitempty"`
	// PollsLeft is how many more polls report InProgress before Status shows (fault injection).
	PollsLeft int `json:"pollsLeft,omitempty"`
}

type operations struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func (o *operations) init() { o.ctx, o.cancel = context.WithCancel(context.Background()) }

func (o *operations) close() {
	o.cancel()
	o.wg.Wait()
}

func (s *Service) registerOperations() {
	for _, t := range []string{"Microsoft.Resources/operationStatuses", "Microsoft.Resources/operationResults"} {
		s.RegisterType(Type{Name: t})
	}
	s.Handle(Route{Method: http.MethodGet, Type: "Microsoft.Resources/operationStatuses", Authorize: s.authorizePoll, Handle: s.getOperationStatus,
		Example: "/subscriptions/{subscriptionId}/providers/Microsoft.Resources/operationStatuses/00000000-0000-0000-0000-000000000000"})
	s.Handle(Route{Method: http.MethodGet, Type: "Microsoft.Resources/operationResults", Authorize: s.authorizePoll, Handle: s.getOperationResult,
		Example: "/subscriptions/{subscriptionId}/providers/Microsoft.Resources/operationResults/00000000-0000-0000-0000-000000000000"})
}

// authorizePoll lets the principal that started an operation poll it; anyone else needs to be
// able to read the subscription's operation results.
func (s *Service) authorizePoll(ctx context.Context, r *Request) error {
	op, err := s.operation(ctx, r.ID.Name())
	if err == nil && op.Initiator == r.Caller.ObjectID {
		return nil
	}
	return s.Check(ctx, r.Caller, "Microsoft.Resources/subscriptions/operationresults/read", "/subscriptions/"+s.o.SubscriptionID)
}

func (s *Service) operation(ctx context.Context, id string) (Operation, error) {
	var op Operation
	err := s.o.Store.View(ctx, func(tx *store.Tx) error { return tx.Get(bucketOperations, id, &op) })
	if errors.Is(err, store.ErrNotFound) {
		return op, Errorf(http.StatusNotFound, "OperationNotFound", "The operation '%s' could not be found.", clip(id, 64))
	}
	return op, err
}

// BeginDelete marks res Deleting, stores a delete operation in the same transaction, starts it
// and returns the 202 answer.
func (s *Service) BeginDelete(ctx context.Context, r *Request, res Resource) (httpx.Response, error) {
	op := Operation{ID: uuid.NewString(), Kind: opDelete, Target: res.ID, Status: OpInProgress,
		APIVersion: r.APIVersion, Initiator: r.Caller.ObjectID, Started: s.now().UTC()}
	err := s.o.Store.Update(ctx, func(tx *store.Tx) error {
		id, err := armid.Parse(res.ID)
		if err != nil {
			return err
		}
		// Any provider's properties: only provisioningState changes.
		_, err = UpdatePropertiesTx(tx, id, func(_ *Resource, props *map[string]any) error {
			if *props == nil {
				*props = map[string]any{}
			}
			(*props)["provisioningState"] = StateDeleting
			return nil
		})
		if err != nil {
			return err
		}
		return tx.Put(bucketOperations, op.ID, op)
	})
	if err != nil {
		return httpx.Response{}, err
	}
	s.launch(op)
	return httpx.Response{Status: http.StatusAccepted, Header: s.pollHeaders(op)}, nil
}

func (s *Service) pollHeaders(op Operation) http.Header {
	base := s.o.BaseURL + "/subscriptions/" + s.o.SubscriptionID + "/providers/Microsoft.Resources/"
	q := "?api-version=" + op.APIVersion
	ra := s.o.Config.RetryAfter
	return http.Header{
		"Azure-Asyncoperation": {base + "operationStatuses/" + op.ID + q},
		"Location":             {base + "operationResults/" + op.ID + q},
		"Retry-After":          {strconv.Itoa(secondsCeil(ra))},
		"Retry-After-Ms":       {strconv.FormatInt(ra.Milliseconds(), 10)},
	}
}

// launch runs op in the background until it ends or the service closes.
func (s *Service) launch(op Operation) {
	s.ops.wg.Add(1)
	go func() {
		defer s.ops.wg.Done()
		ctx := s.ops.ctx
		err := s.run(ctx, op)
		if ctx.Err() != nil {
			return // interrupted: resumed at the next start
		}
		op.Status, op.Ended = OpSucceeded, s.now().UTC()
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				s.log.ErrorContext(ctx, "Operation failed", "operationId", op.ID, "kind", op.Kind, "err", err)
				e = Errorf(http.StatusInternalServerError, "InternalServerError", "The operation failed.")
			}
			op.Status, op.ErrCode, op.ErrMessage = OpFailed, e.Code, e.Message
		}
		if err := s.o.Store.Update(ctx, func(tx *store.Tx) error { return tx.Put(bucketOperations, op.ID, op) }); err != nil && ctx.Err() == nil {
			s.log.ErrorContext(ctx, "Recording operation failed", "operationId", op.ID, "err", err)
		}
	}()
}

func (s *Service) run(ctx context.Context, op Operation) error {
	switch op.Kind {
	case opDelete:
		return s.o.Store.Update(ctx, func(tx *store.Tx) error {
			id, err := armid.Parse(op.Target)
			if err != nil {
				return err
			}
			res, err := GetTx(tx, id)
			var e *Error
			if errors.As(err, &e) && e.Status == http.StatusNotFound {
				return nil // already gone: a resumed operation
			} else if err != nil {
				return err
			}
			return s.DeleteTx(tx, res)
		})
	}
	if fn, ok := s.runners[op.Kind]; ok {
		id, err := armid.Parse(op.Target)
		if err != nil {
			return err
		}
		return fn(ctx, id)
	}
	return fmt.Errorf("run operation: unknown kind %q", op.Kind)
}

// Runner does the work of a provider's long-running operation on target. It must be
// idempotent: an operation a stop or crash interrupted runs again at the next Start. An *Error
// it returns is the operation's error as pollers see it.
type Runner func(ctx context.Context, target armid.ID) error

// RegisterOperation adds a provider's kind of long-running operation (before Start).
func (s *Service) RegisterOperation(kind string, run Runner) { s.runners[kind] = run }

// NewOperationTx stores an in-progress operation of kind on target in tx, the transaction of
// the change that starts it; Launch it once that transaction committed.
func (s *Service) NewOperationTx(tx *store.Tx, r *Request, kind, target string) (Operation, error) {
	op := Operation{ID: uuid.NewString(), Kind: kind, Target: target, Status: OpInProgress,
		APIVersion: r.APIVersion, Initiator: r.Caller.ObjectID, Started: s.now().UTC()}
	return op, tx.Put(bucketOperations, op.ID, op)
}

// Launch runs a stored operation in the background.
func (s *Service) Launch(op Operation) { s.launch(op) }

// Go runs f in the background with the operations' lifetime: its context ends when the cloud
// closes, and Close waits for it. An error is logged as what failed.
func (s *Service) Go(what string, f func(ctx context.Context) error) {
	s.ops.wg.Add(1)
	go func() {
		defer s.ops.wg.Done()
		if err := f(s.ops.ctx); err != nil && s.ops.ctx.Err() == nil {
			s.log.Error(what+" failed", "err", err)
		}
	}()
}

// Accepted is the answer that starts op: status (201 or 202) with the polling headers and body.
func (s *Service) Accepted(status int, op Operation, body any) httpx.Response {
	return httpx.Response{Status: status, Header: s.pollHeaders(op), Body: body}
}

func (s *Service) resumeOperations(ctx context.Context) error {
	var pending []Operation
	err := s.o.Store.View(ctx, func(tx *store.Tx) error {
		return tx.ForEach(bucketOperations, "", func(_ string, decode func(any) error) error {
			var op Operation
			if err := decode(&op); err != nil {
				return err
			}
			if op.Status == OpInProgress {
				pending = append(pending, op)
			}
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("resume operations: %w", err)
	}
	for _, op := range pending {
		s.launch(op)
	}
	return nil
}

type operationStatus struct {
	ID        string            `json:"id"`
	Name      string            `json:"name"`
	Status    string            `json:"status"`
	StartTime time.Time         `json:"startTime"`
	EndTime   *time.Time        `json:"endTime,omitempty"`
	Error     map[string]string `json:"error,omitempty"`
}

func (s *Service) getOperationStatus(ctx context.Context, r *Request) (httpx.Response, error) {
	op, err := s.poll(ctx, r.ID.Name())
	if err != nil {
		return httpx.Response{}, err
	}
	body := operationStatus{ID: r.ID.String(), Name: op.ID, Status: op.Status, StartTime: op.Started}
	if !op.Ended.IsZero() {
		body.EndTime = &op.Ended
	}
	if op.Status == OpFailed || op.Status == OpCanceled {
		body.Error = map[string]string{"code": op.ErrCode, "message": op.ErrMessage}
	}
	res := httpx.Response{Body: body}
	if op.Status == OpInProgress {
		res.Header = s.retryHeaders()
	}
	return res, nil
}

func (s *Service) getOperationResult(ctx context.Context, r *Request) (httpx.Response, error) {
	op, err := s.poll(ctx, r.ID.Name())
	if err != nil {
		return httpx.Response{}, err
	}
	switch op.Status {
	case OpInProgress:
		h := s.pollHeaders(op)
		h.Del("Azure-Asyncoperation")
		return httpx.Response{Status: http.StatusAccepted, Header: h}, nil
	case OpFailed, OpCanceled:
		return httpx.Response{}, Errorf(http.StatusBadRequest, op.ErrCode, "%s", op.ErrMessage)
	}
	return httpx.Response{Status: http.StatusOK}, nil
}

func (s *Service) retryHeaders() http.Header {
	ra := s.o.Config.RetryAfter
	return http.Header{"Retry-After": {strconv.Itoa(secondsCeil(ra))}, "Retry-After-Ms": {strconv.FormatInt(ra.Milliseconds(), 10)}}
}

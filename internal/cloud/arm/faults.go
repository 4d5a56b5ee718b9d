package arm

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/cerulean/cerulean/internal/cloud/faults"
	"github.com/cerulean/cerulean/internal/cloud/httpx"
	"github.com/cerulean/cerulean/internal/cloud/store"
)

// Fault-injected long-running operations. A fault rule (package faults) can make any ARM write
// long-running so that clients' pollers can be tested on purpose: the operation is stored like a
// real one, reports InProgress for the rule's number of polls, then its result.

const opFault = "fault" // an operation whose outcome a fault rule fixed in advance; never launched

// faultOperation answers r as a long-running operation. A Succeeded operation runs the handler
// first: the change is made at once and only its completion is reported late. A Failed or
// Canceled one makes no change, as a real failed operation that never started.
func (s *Service) faultOperation(ctx context.Context, rt Route, r *Request, lro faults.LRO, rule string) (httpx.Response, error) {
	now := s.now().UTC()
	op := Operation{ID: uuid.NewString(), Kind: opFault, Target: r.ID.String(), Status: lro.Result,
		APIVersion: r.APIVersion, Initiator: r.Caller.ObjectID, Started: now, Ended: now, PollsLeft: lro.Polls}
	write := r.HTTP.Method == http.MethodPut || r.HTTP.Method == http.MethodPatch
	res := httpx.Response{Status: http.StatusAccepted}
	if write {
		res.Status = http.StatusCreated
	}
	if lro.Result == faults.ResultSucceeded {
		var err error
		if res, err = rt.Handle(ctx, r); err != nil {
			return res, err
		}
		if !write {
			res.Status, res.Body = http.StatusAccepted, nil
		}
	} else {
		op.ErrCode, op.ErrMessage = lro.Code, lro.Message
		if op.ErrCode == "" {
			op.ErrCode = "OperationFailed"
			if lro.Result == faults.ResultCanceled {
				op.ErrCode = "OperationCanceled"
			}
		}
		if op.ErrMessage == "" {
			op.ErrMessage = "The operation did not complete (injected fault '" + rule + "')."
		}
	}
	if err := s.o.Store.Update(ctx, func(tx *store.Tx) error { return tx.Put(bucketOperations, op.ID, op) }); err != nil {
		return httpx.Response{}, err
	}
	// The injected operation replaces any the handler started, which still runs to its end.
	h := res.Header.Clone()
	if h == nil {
		h = http.Header{}
	}
	for k, v := range s.pollHeaders(op) {
		h[k] = v
	}
	res.Header = h
	return res, nil
}

// poll reads an operation for a client's poll: one with polls left spends one and reports
// InProgress.
func (s *Service) poll(ctx context.Context, id string) (Operation, error) {
	op, err := s.operation(ctx, id)
	if err != nil || op.PollsLeft <= 0 {
		return op, err
	}
	spent := false
	err = s.o.Store.Update(ctx, func(tx *store.Tx) error {
		if err := tx.Get(bucketOperations, id, &op); err != nil {
			return err
		}
		if op.PollsLeft <= 0 {
			return nil // a concurrent poll spent the last one
		}
		op.PollsLeft--
		spent = true
		return tx.Put(bucketOperations, id, op)
	})
	if errors.Is(err, store.ErrNotFound) {
		return op, Errorf(http.StatusNotFound, "OperationNotFound", "The operation '%s' could not be found.", clip(id, 64))
	} else if err != nil {
		return op, err
	}
	if spent {
		op.Status, op.Ended = OpInProgress, time.Time{}
	}
	return op, nil
}

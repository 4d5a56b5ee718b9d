package storage

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// The management plane's view of the data (ARM's blobServices/default/containers,
// queueServices/default/queues, tableServices/default/tables, and deleting an account's
// data): calls to Azurite itself, path-style, signed like every forwarded request.

// Kinds of children, by their ARM collection name.
const (
	Containers = "containers"
	Queues     = "queues"
	Tables     = "tables"
)

var kindService = map[string]string{Containers: "blob", Queues: "queue", Tables: "table"}

// ErrChildNotFound is returned for a container, queue or table that does not exist.
var ErrChildNotFound = errors.New("not found")

// ErrChildBeingDeleted is returned when a name cannot be taken yet (Azure: ContainerBeingDeleted).
var ErrChildBeingDeleted = errors.New("being deleted")

func (s *Service) call(ctx context.Context, account, kind, method, path string, query url.Values, body []byte) (*http.Response, error) {
	base, err := s.o.Azurite.Endpoint(ctx, kindService[kind])
	if err != nil {
		return nil, err
	}
	if query == nil {
		query = url.Values{}
	}
	for k, v := range forwardSAS(account, s.o.Azurite.Key(), s.o.Clock()) {
		query[k] = v
	}
	req, err := http.NewRequestWithContext(ctx, method, base+"/"+account+path+"?"+query.Encode(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("x-ms-version", "2021-12-02")
	if kind == Tables {
		req.Header.Set("Accept", "application/json;odata=nometadata")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("DataServiceVersion", "3.0")
	}
	resp, err := s.client().Do(req)
	if err != nil {
		return nil, fmt.Errorf("call azurite: %w", err)
	}
	return resp, nil
}

func (s *Service) client() *http.Client {
	return &http.Client{Transport: &http.Transport{Proxy: nil}}
}

func drain(resp *http.Response) string {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	_ = resp.Body.Close()
	return string(b)
}

func statusError(resp *http.Response, what string) error {
	body := drain(resp)
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return ErrChildNotFound
	case resp.StatusCode == http.StatusConflict && strings.Contains(body, "BeingDeleted"):
		return ErrChildBeingDeleted
	}
	return fmt.Errorf("%s: azurite answered %d %s", what, resp.StatusCode, resp.Header.Get("x-ms-error-code"))
}

// PutChild creates the container, queue or table name of account; existing is no error.
func (s *Service) PutChild(ctx context.Context, account, kind, name string) error {
	var resp *http.Response
	var err error
	switch kind {
	case Containers:
		resp, err = s.call(ctx, account, kind, http.MethodPut, "/"+name, url.Values{"restype": {"container"}}, nil)
	case Queues:
		resp, err = s.call(ctx, account, kind, http.MethodPut, "/"+name, nil, nil)
	default:
		b, _ := json.Marshal(map[string]string{"TableName": name})
		resp, err = s.call(ctx, account, kind, http.MethodPost, "/Tables", nil, b)
	}
	if err != nil {
		return err
	}
	if resp.StatusCode < 300 || resp.StatusCode == http.StatusConflict && strings.Contains(resp.Header.Get("x-ms-error-code"), "AlreadyExists") {
		drain(resp)
		return nil
	}
	return statusError(resp, "create "+kind)
}

// ChildExists reports whether the container, queue or table exists.
func (s *Service) ChildExists(ctx context.Context, account, kind, name string) (bool, error) {
	var resp *http.Response
	var err error
	switch kind {
	case Containers:
		resp, err = s.call(ctx, account, kind, http.MethodGet, "/"+name, url.Values{"restype": {"container"}}, nil)
	case Queues:
		resp, err = s.call(ctx, account, kind, http.MethodGet, "/"+name, url.Values{"comp": {"metadata"}}, nil)
	default:
		resp, err = s.call(ctx, account, kind, http.MethodGet, "/Tables('"+name+"')", nil, nil)
	}
	if err != nil {
		return false, err
	}
	if resp.StatusCode < 300 {
		drain(resp)
		return true, nil
	}
	if err := statusError(resp, "get "+kind); !errors.Is(err, ErrChildNotFound) {
		return false, err
	}
	return false, nil
}

// DeleteChild deletes the container, queue or table; false when it did not exist.
func (s *Service) DeleteChild(ctx context.Context, account, kind, name string) (bool, error) {
	var resp *http.Response
	var err error
	switch kind {
	case Containers:
		resp, err = s.call(ctx, account, kind, http.MethodDelete, "/"+name, url.Values{"restype": {"container"}}, nil)
	case Queues:
		resp, err = s.call(ctx, account, kind, http.MethodDelete, "/"+name, nil, nil)
	default:
		resp, err = s.call(ctx, account, kind, http.MethodDelete, "/Tables('"+name+"')", nil, nil)
	}
	if err != nil {
		return false, err
	}
	if resp.StatusCode < 300 {
		drain(resp)
		return true, nil
	}
	if err := statusError(resp, "delete "+kind); !errors.Is(err, ErrChildNotFound) {
		return false, err
	}
	return false, nil
}

// ListChildren lists the names of the account's containers, queues or tables.
func (s *Service) ListChildren(ctx context.Context, account, kind string) ([]string, error) {
	var names []string
	marker := ""
	for {
		q := url.Values{}
		path := "/"
		if kind == Tables {
			path = "/Tables"
			if marker != "" {
				q.Set("NextTableName", marker)
			}
		} else {
			q.Set("comp", "list")
			if marker != "" {
				q.Set("marker", marker)
			}
		}
		resp, err := s.call(ctx, account, kind, http.MethodGet, path, q, nil)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode >= 300 {
			return nil, statusError(resp, "list "+kind)
		}
		b, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil {
			return nil, err
		}
		if kind == Tables {
			var out struct {
				Value []struct {
					TableName string `json:"TableName"`
				} `json:"value"`
			}
			if err := json.Unmarshal(b, &out); err != nil {
				return nil, fmt.Errorf("list tables: %w", err)
			}
			for _, v := range out.Value {
				names = append(names, v.TableName)
			}
			marker = resp.Header.Get("x-ms-continuation-NextTableName")
		} else {
			var out struct {
				Names      []string `xml:"Containers>Container>Name"`
				Queues     []string `xml:"Queues>Queue>Name"`
				NextMarker string   `xml:"NextMarker"`
			}
			if err := xml.Unmarshal(b, &out); err != nil {
				return nil, fmt.Errorf("list %s: %w", kind, err)
			}
			names = append(names, out.Names...)
			names = append(names, out.Queues...)
			marker = out.NextMarker
		}
		if marker == "" {
			return names, nil
		}
	}
}

// DeleteAccountData deletes every container, queue and table of account. Nothing is started
// when Azurite never stored anything for this cloud.
func (s *Service) DeleteAccountData(ctx context.Context, account string) error {
	if _, err := os.Stat(filepath.Join(s.o.Azurite.o.DataDir, "data")); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	for _, kind := range []string{Containers, Queues, Tables} {
		names, err := s.ListChildren(ctx, account, kind)
		if err != nil {
			return err
		}
		for _, n := range names {
			if _, err := s.DeleteChild(ctx, account, kind, n); err != nil {
				return err
			}
		}
	}
	return nil
}

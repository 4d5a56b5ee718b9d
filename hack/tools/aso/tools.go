//go:build tools

// Package tools pins Azure Service Operator v2's controller, the baseline the manager's
// benchmark runs beside Cerulean's manager. Built into bin/ by hack/tools/build.sh, only for
// `make bench` (about 8 minutes and 3.5 GB of memory on 2 cores).
package tools

import _ "github.com/Azure/azure-service-operator/v2/cmd/controller"

// Package export_wit_world receives the world's exports from the generated glue
// (internal/bindings/exports) and hands them to the reconciler registered with guest.Export.
// The SDK's own code, not generated: wit-bindgen's stubs for this package are not used.
package export_wit_world

import (
	"kwop.dev/guest/internal/bindings/kwop_reconciler_types"
	witTypes "kwop.dev/guest/internal/wit/types"
)

// Result is what reconcile returns.
type Result = witTypes.Result[kwop_reconciler_types.Outcome, kwop_reconciler_types.Failure]

// FinalizeResult is what finalize returns.
type FinalizeResult = witTypes.Result[kwop_reconciler_types.FinalizeOutcome, kwop_reconciler_types.Failure]

// ValidateResult is what validate returns.
type ValidateResult = witTypes.Result[[]string, []kwop_reconciler_types.Violation]

// Set by the SDK when a reconciler is exported.
var (
	InfoFunc      func() kwop_reconciler_types.PluginInfo
	ReconcileFunc func(kwop_reconciler_types.Request) Result
	FinalizeFunc  func(kwop_reconciler_types.Request) FinalizeResult
	ValidateFunc  func(kwop_reconciler_types.AdmissionRequest) ValidateResult
)

const notExported = "kwop guest: no reconciler: call guest.Export(...) in an init function of package main"

// Info implements the world's `info` export.
func Info() kwop_reconciler_types.PluginInfo {
	if InfoFunc == nil {
		panic(notExported)
	}
	return InfoFunc()
}

// Reconcile implements the world's `reconcile` export.
func Reconcile(req kwop_reconciler_types.Request) Result {
	if ReconcileFunc == nil {
		panic(notExported)
	}
	return ReconcileFunc(req)
}

// Finalize implements the world's `finalize` export.
func Finalize(req kwop_reconciler_types.Request) FinalizeResult {
	if FinalizeFunc == nil {
		panic(notExported)
	}
	return FinalizeFunc(req)
}

// Validate implements the world's `validate` export.
func Validate(req kwop_reconciler_types.AdmissionRequest) ValidateResult {
	if ValidateFunc == nil {
		panic(notExported)
	}
	return ValidateFunc(req)
}

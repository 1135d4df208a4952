module example.com/{{name}}

go 1.25

require kwop.dev/guest v0.0.0

// The SDK, vendored in wit/go next to the WIT it is generated from (it is not on a module proxy).
replace kwop.dev/guest => ./wit/go
